#include "mixed_calls.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "notif_watch.h"
#include "test_util.h"

namespace kvlane::test {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr uint32_t kThreads = 3;
constexpr uint32_t kGroups = 4;  // one handle per group: groups never share a page
constexpr uint32_t kGroupPages = 16;
constexpr uint32_t kPages = kMixPages;
constexpr uint32_t kPage = kMixPage;
static_assert(kGroups * kGroupPages == kPages);
constexpr auto kTerminalWithin = 10s;

// One handle of a worker, over the pages of its group.
struct Slot {
  XferHandle h{};
  bool made = false;
  bool in_flight = false;
  bool canceled = false;  // Cancel answered kOk for the post in flight
  bool notified = false;  // the post in flight carries a notification
  Op op = Op::kWrite;
  std::vector<uint32_t> li, ri;  // page pairs, both within the group
  std::string notif;
};

// One thread's share: a region on each agent, prepared whole (one descriptor
// per page), and one slot per group.
class Worker {
 public:
  // `meta_mu` serializes the workers' metadata refreshes (export, load,
  // prepare), so that no worker loads a blob older than the one another
  // worker's PrepareRemote relies on.
  Worker(Agent& a, Agent& b, NotifWatch& notifs, std::mutex& meta_mu, MixTally& tally,
         const PageStoreMaker& make, uint32_t index, uint64_t seed)
      : a_(a),
        b_(b),
        notifs_(notifs),
        meta_mu_(meta_mu),
        tally_(tally),
        index_(index),
        rng_(seed),
        local_(make(index, false)),
        remote_(make(index, true)) {}

  // Runs the mix until `until`, then lets go of its handles and regions.
  void Run(Clock::time_point until);

 private:
  PageStore& Store(bool remote) { return remote ? *remote_ : *local_; }
  uint8_t* Addr(bool remote, uint32_t p) { return Store(remote).base() + p * kPage; }
  uint8_t* Shadow(bool remote, uint32_t p) {
    return (remote ? remote_shadow_ : local_shadow_).data() + p * kPage;
  }
  bool Chance(uint32_t percent) { return rng_() % 100 < percent; }

  bool Setup();
  bool RegisterLocal();
  bool RegisterRemote();
  // A new handle for group g, maybe notified (a WRITE) when `notif_ok`.
  bool MakeSlot(uint32_t g, bool notif_ok = true);
  bool RemakeAll();
  bool Start(uint32_t g);
  bool Finish(uint32_t g);
  bool FinishAll();
  bool Verify(uint32_t g, const Status& st);
  bool GroupMatchesShadow(uint32_t g, bool remote, const char* what);
  bool ChurnLocal();
  bool ChurnRemote();

  Agent& a_;
  Agent& b_;
  NotifWatch& notifs_;
  std::mutex& meta_mu_;
  MixTally& tally_;
  const uint32_t index_;
  std::mt19937_64 rng_;
  std::unique_ptr<PageStore> local_, remote_;
  std::vector<uint8_t> local_shadow_ = std::vector<uint8_t>(kPages * kPage);
  std::vector<uint8_t> remote_shadow_ = std::vector<uint8_t>(kPages * kPage);
  RegionId local_region_{}, remote_region_{};
  PreparedId lp_{}, rp_{};
  Slot slots_[kGroups];
  uint64_t epoch_ = 0;
};

#define MIX_CHECK(cond, msg)                               \
  do {                                                     \
    if (!(cond)) {                                         \
      ADD_FAILURE() << "worker " << index_ << ": " << msg; \
      return false;                                        \
    }                                                      \
  } while (0)

bool Worker::RegisterLocal() {
  auto r = a_.RegisterMemory(local_->base(), kPages * kPage, local_->kind(), local_->device());
  MIX_CHECK(r.ok(), "RegisterMemory (local): " << r.status().ToString());
  local_region_ = r.value();
  DescList l{local_->kind(), {}};
  for (uint32_t p = 0; p < kPages; ++p) l.Add(Addr(false, p), kPage, local_->device());
  auto lp = a_.PrepareLocal(l);
  MIX_CHECK(lp.ok(), "PrepareLocal: " << lp.status().ToString());
  lp_ = lp.value();
  return true;
}

bool Worker::RegisterRemote() {
  auto r = b_.RegisterMemory(remote_->base(), kPages * kPage, remote_->kind(), remote_->device());
  MIX_CHECK(r.ok(), "RegisterMemory (remote): " << r.status().ToString());
  remote_region_ = r.value();
  std::lock_guard lock(meta_mu_);
  auto blob = b_.ExportMetadata();
  MIX_CHECK(blob.ok(), "ExportMetadata: " << blob.status().ToString());
  auto loaded = a_.LoadPeer(blob.value());
  MIX_CHECK(loaded.ok(), "LoadPeer: " << loaded.status().ToString());
  DescList r2{remote_->kind(), {}};
  for (uint32_t p = 0; p < kPages; ++p) r2.Add(Addr(true, p), kPage, remote_->device());
  auto rp = a_.PrepareRemote("b", r2);
  MIX_CHECK(rp.ok(), "PrepareRemote: " << rp.status().ToString());
  rp_ = rp.value();
  return true;
}

bool Worker::Setup() {
  for (uint32_t p = 0; p < kPages; ++p) {
    Fill(Shadow(false, p), kPage, index_ * 1000 + 1, p * kPage);
    Fill(Shadow(true, p), kPage, index_ * 1000 + 2, p * kPage);
    local_->Put(p, Shadow(false, p));
    remote_->Put(p, Shadow(true, p));
  }
  return RegisterLocal() && RegisterRemote() && RemakeAll();
}

// A random pairing of a random subset of the group's pages (1 to all of them).
bool Worker::MakeSlot(uint32_t g, bool notif_ok) {
  Slot& s = slots_[g];
  if (s.made) MIX_CHECK(a_.Release(&s.h).ok(), "Release of an idle handle");
  s.made = false;
  std::vector<uint32_t> l(kGroupPages), r(kGroupPages);
  for (uint32_t i = 0; i < kGroupPages; ++i) l[i] = r[i] = g * kGroupPages + i;
  std::shuffle(l.begin(), l.end(), rng_);
  std::shuffle(r.begin(), r.end(), rng_);
  const uint32_t n = 1 + rng_() % kGroupPages;
  s.li.assign(l.begin(), l.begin() + n);
  s.ri.assign(r.begin(), r.begin() + n);
  s.op = Chance(50) ? Op::kWrite : Op::kRead;
  s.notif.clear();
  if (notif_ok && s.op == Op::kWrite && Chance(40)) s.notif = NotifWatch::Name(index_, g);
  auto h = a_.MakeTransfer(s.op, lp_, s.li, rp_, s.ri, s.notif);
  MIX_CHECK(h.ok(), "MakeTransfer: " << h.status().ToString());
  s.h = h.value();
  s.made = true;
  return true;
}

bool Worker::RemakeAll() {
  for (uint32_t g = 0; g < kGroups; ++g)
    if (!MakeSlot(g)) return false;
  return true;
}

// New bytes in the source pages, then a post (and now and then a Cancel).
bool Worker::Start(uint32_t g) {
  Slot& s = slots_[g];
  const bool src_remote = s.op == Op::kRead;
  const auto& src = src_remote ? s.ri : s.li;
  const auto& dst = src_remote ? s.li : s.ri;
  ++epoch_;
  for (uint32_t p : src) {
    Fill(Shadow(src_remote, p), kPage, (uint64_t{index_} << 40) + epoch_, p * kPage);
    Store(src_remote).Put(p, Shadow(src_remote, p));
  }
  s.notified = !s.notif.empty();
  if (s.notified) {  // a WRITE: its destination is the peer's
    std::vector<uint8_t> want;
    for (uint32_t p : src) want.insert(want.end(), Shadow(false, p), Shadow(false, p) + kPage);
    notifs_.Expect(s.notif, [store = remote_.get(), dst, want = std::move(want)] {
      std::vector<uint8_t> got(kPage);
      for (size_t k = 0; k < dst.size(); ++k) {
        store->Get(dst[k], got.data());
        if (std::memcmp(got.data(), want.data() + k * kPage, kPage) != 0) return false;
      }
      return true;
    });
  }
  const XferHandle before = s.h;
  const Status p = a_.Post(&s.h);
  MIX_CHECK(!p.is_error(), "Post: " << p.ToString());
  if (before.gen != s.h.gen && before.valid())
    MIX_CHECK(a_.Check(before).code() == Code::kNotFound, "the previous post's copy is not stale");
  s.in_flight = true;
  s.canceled = false;
  if (Chance(15)) {
    const Status c = a_.Cancel(s.h);
    MIX_CHECK(c.ok() || c.code() == Code::kNotAllowed, "Cancel: " << c.ToString());
    s.canceled = c.ok();
    if (!c.ok()) tally_.cancel_refused.fetch_add(1);  // a lane had started it
  }
  return true;
}

// The post's terminal answer (through Wait or a Check loop), checked.
bool Worker::Finish(uint32_t g) {
  Slot& s = slots_[g];
  if (!s.in_flight) return true;
  Status st;
  if (Chance(50)) {
    st = a_.Wait(s.h, kTerminalWithin);
  } else {
    const auto until = Clock::now() + kTerminalWithin;
    while ((st = a_.Check(s.h)).in_progress() && Clock::now() < until) std::this_thread::yield();
  }
  MIX_CHECK(!st.in_progress() && st.code() != Code::kTimeout,
            "no terminal answer within " << kTerminalWithin.count() << " s");
  s.in_flight = false;
  for (int k = 0; k < 3; ++k)
    MIX_CHECK(a_.Check(s.h).code() == st.code(), "a terminal answer changed");
  return Verify(g, st);
}

bool Worker::GroupMatchesShadow(uint32_t g, bool remote, const char* what) {
  std::vector<uint8_t> got(kPage);
  for (uint32_t i = 0; i < kGroupPages; ++i) {
    const uint32_t p = g * kGroupPages + i;
    Store(remote).Get(p, got.data());
    MIX_CHECK(
        std::memcmp(got.data(), Shadow(remote, p), kPage) == 0,
        what << ": page " << p << (remote ? " (remote)" : " (local)") << " holds wrong bytes");
  }
  return true;
}

bool Worker::Verify(uint32_t g, const Status& st) {
  const Code c = st.code();
  Slot& s = slots_[g];
  const bool dst_remote = s.op == Op::kWrite;
  const auto& src = dst_remote ? s.li : s.ri;
  const auto& dst = dst_remote ? s.ri : s.li;
  (c == Code::kOk ? tally_.ok : tally_.canceled).fetch_add(1);
  if (c == Code::kOk) {
    for (size_t k = 0; k < src.size(); ++k)
      std::memcpy(Shadow(dst_remote, dst[k]), Shadow(!dst_remote, src[k]), kPage);
  } else {
    MIX_CHECK(c == Code::kCanceled && s.canceled,
              "unexpected answer " << st.ToString() << (s.canceled ? " after Cancel said ok" : ""));
  }
  if (!GroupMatchesShadow(g, dst_remote, "after a post")) return false;
  if (s.notified) {
    const Status n = notifs_.Settle(s.notif, c == Code::kOk, kTerminalWithin);
    MIX_CHECK(n.ok(), "notification: " << n.ToString());
  }
  return true;
}

bool Worker::FinishAll() {
  for (uint32_t g = 0; g < kGroups; ++g)
    if (!Finish(g)) return false;
  return true;
}

// The local region goes while posts on it may be in flight: DeregisterMemory
// waits for them, posts on it are refused after, and a new region over the
// same memory takes its place.
bool Worker::ChurnLocal() {
  const Status d = a_.DeregisterMemory(local_region_);
  MIX_CHECK(d.ok(), "DeregisterMemory (local): " << d.ToString());
  for (uint32_t g = 0; g < kGroups; ++g) {
    Slot& s = slots_[g];
    if (!s.in_flight) continue;
    MIX_CHECK(!a_.Check(s.h).in_progress(), "a post still in flight after DeregisterMemory");
    tally_.deregistered_in_flight.fetch_add(1);
  }
  tally_.local_churn.fetch_add(1);
  if (!FinishAll()) return false;
  const Status p = a_.Post(&slots_[rng_() % kGroups].h);
  MIX_CHECK(p.code() == Code::kInvalidArgument, "Post on a deregistered region: " << p.ToString());
  MIX_CHECK(a_.ReleasePrepared(lp_).ok(), "ReleasePrepared");
  return RegisterLocal() && RemakeAll();
}

// The peer deregisters the remote region between posts: a post then fails
// stale and moves nothing; a new region and fresh metadata take its place.
bool Worker::ChurnRemote() {
  if (!FinishAll()) return false;
  const uint32_t g = rng_() % kGroups;
  Slot& s = slots_[g];
  if (!s.notif.empty() && !MakeSlot(g, false)) return false;  // no notification comes for it
  const Status d = b_.DeregisterMemory(remote_region_);
  MIX_CHECK(d.ok(), "DeregisterMemory (remote): " << d.ToString());
  Status st = a_.Post(&s.h);
  if (!st.is_error()) st = a_.Wait(s.h, kTerminalWithin);
  MIX_CHECK(st.code() == Code::kRemoteStale,
            "a post to a deregistered peer region: " << st.ToString());
  if (!GroupMatchesShadow(g, true, "stale WRITE") || !GroupMatchesShadow(g, false, "stale READ"))
    return false;
  MIX_CHECK(a_.ReleasePrepared(rp_).ok(), "ReleasePrepared");
  tally_.remote_churn.fetch_add(1);
  return RegisterRemote() && RemakeAll();
}

void Worker::Run(Clock::time_point until) {
  if (!Setup()) return;
  while (Clock::now() < until && !notifs_.failed()) {
    const uint32_t g = rng_() % kGroups;
    const uint32_t r = rng_() % 100;
    bool ok = true;
    if (r < 70) {
      ok = slots_[g].in_flight ? Finish(g) : Start(g);
    } else if (r < 90) {
      const XferHandle old = slots_[g].h;
      ok = Finish(g) && MakeSlot(g);
      tally_.remade.fetch_add(1);
      if (ok && a_.Check(old).code() != Code::kNotFound) {
        ADD_FAILURE() << "worker " << index_ << ": a released handle is not stale";
        ok = false;
      }
    } else if (r < 96) {
      ok = ChurnLocal();
    } else {
      ok = ChurnRemote();
    }
    if (!ok) {
      notifs_.Fail();
      return;
    }
  }
  if (!FinishAll()) notifs_.Fail();
  for (Slot& s : slots_)
    if (s.made) EXPECT_TRUE(a_.Release(&s.h).ok());
  EXPECT_TRUE(a_.ReleasePrepared(lp_).ok());
  EXPECT_TRUE(a_.ReleasePrepared(rp_).ok());
  EXPECT_TRUE(a_.DeregisterMemory(local_region_).ok());
  EXPECT_TRUE(b_.DeregisterMemory(remote_region_).ok());
}

uint64_t EnvOr(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::strtoull(v, nullptr, 10) : fallback;
}

}  // namespace

AgentOptions MixedCallsOptions() {
  AgentOptions o;
  o.lanes_per_peer = 3;
  o.chunk_bytes = 2 * kPage;
  o.stripe_min_bytes = 4 * kPage;
  o.max_segments_per_chunk = 3;
  return o;
}

void RunMixedCalls(Agent& a, Agent& b, const PageStoreMaker& make, MixTally& n) {
  const uint64_t seed = EnvOr("KVLANE_MIX_SEED", 42);
  const auto seconds = std::chrono::seconds(EnvOr("KVLANE_MIX_SECONDS", 3));
  std::cerr << "mixed calls: KVLANE_MIX_SEED=" << seed << ", " << seconds.count() << " s, "
            << kThreads << " threads\n";
  NotifWatch notifs(b);
  std::mutex meta_mu;
  std::vector<std::unique_ptr<Worker>> workers;
  for (uint32_t t = 0; t < kThreads; ++t)
    workers.push_back(std::make_unique<Worker>(a, b, notifs, meta_mu, n, make, t, seed * 7919 + t));
  const auto until = Clock::now() + seconds;
  std::vector<std::thread> threads;
  for (auto& w : workers) threads.emplace_back([&w, until] { w->Run(until); });
  for (auto& t : threads) t.join();
  notifs.Stop();
  n.notifications = notifs.checked();
  n.failed = notifs.failed();
  EXPECT_FALSE(n.failed);
  std::cerr << "mixed calls: " << n.ok << " ok, " << n.canceled << " canceled, " << n.cancel_refused
            << " cancels refused, " << n.remade << " remade, " << n.local_churn
            << " local regions gone (" << n.deregistered_in_flight << " posts in flight), "
            << n.remote_churn << " peer regions gone, " << n.notifications
            << " notifications checked\n";
  EXPECT_TRUE(a.PeerError("b").ok()) << a.PeerError("b").ToString();
}

HostPages::HostPages() : bytes_(kMixPages * kMixPage) {}
void HostPages::Put(uint32_t page, const uint8_t* bytes) {
  std::memcpy(bytes_.data() + page * kMixPage, bytes, kMixPage);
}
void HostPages::Get(uint32_t page, uint8_t* out) {
  std::memcpy(out, bytes_.data() + page * kMixPage, kMixPage);
}

}  // namespace kvlane::test
