#include "test_util.h"

#include <gtest/gtest.h>
#include <time.h>
#include <unistd.h>

#include <fstream>

#include "core/agent_impl.h"

namespace kvlane::test {

AgentOptions OptionsFor(const std::string& name, const std::string& transport) {
  AgentOptions o;
  o.name = name;
  o.transports = {transport};
  return o;
}

Pair MakePair(const std::string& transport, AgentOptions base) {
  Pair p;
  base.transports = {transport};
  base.name = "a";
  auto a = Agent::Create(base);
  base.name = "b";
  auto b = Agent::Create(base);
  EXPECT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_TRUE(b.ok()) << b.status().ToString();
  if (a.ok()) p.a = std::move(a).value();
  if (b.ok()) p.b = std::move(b).value();
  return p;
}

void Connect(Agent& from, Agent& to) {
  auto md = to.ExportMetadata();
  ASSERT_TRUE(md.ok()) << md.status().ToString();
  auto name = from.LoadPeer(md.value());
  ASSERT_TRUE(name.ok()) << name.status().ToString();
  ASSERT_EQ(name.value(), to.name());
}

Result<XferHandle> MakeSimple(Agent& a, const std::string& peer, Op op, const void* local,
                              const void* remote, uint64_t n, std::string_view notif,
                              XferOptions xo) {
  DescList l, r;
  l.Add(local, n);
  r.Add(remote, n);
  KVLANE_ASSIGN_OR_RETURN(PreparedId lp, a.PrepareLocal(l));
  KVLANE_ASSIGN_OR_RETURN(PreparedId rp, a.PrepareRemote(peer, r));
  return a.MakeTransfer(op, lp, {}, rp, {}, notif, xo);
}

Status PostAndWait(Agent& a, XferHandle* h) {
  Status s = a.Post(h);
  if (s.is_error()) return s;
  return a.Wait(*h, std::chrono::seconds(10));
}

uint64_t RssBytes() {
  std::ifstream f("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  f >> size >> resident;
  return resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

std::chrono::nanoseconds ProcessCpuTime() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return std::chrono::seconds(t.tv_sec) + std::chrono::nanoseconds(t.tv_nsec);
}

uint8_t PatternByte(uint64_t seed, uint64_t offset) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + offset;
  x ^= x >> 29;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 32;
  return static_cast<uint8_t>(x);
}

void Fill(std::vector<uint8_t>& buf, uint64_t seed) { Fill(buf.data(), buf.size(), seed); }

void Fill(uint8_t* p, uint64_t n, uint64_t seed, uint64_t base_offset) {
  for (uint64_t i = 0; i < n; ++i) p[i] = PatternByte(seed, base_offset + i);
}

int64_t FirstMismatch(const uint8_t* p, uint64_t n, uint64_t seed, uint64_t base_offset) {
  for (uint64_t i = 0; i < n; ++i)
    if (p[i] != PatternByte(seed, base_offset + i)) return static_cast<int64_t>(i);
  return -1;
}

int64_t FirstNot(const uint8_t* p, uint64_t n, uint8_t value) {
  for (uint64_t i = 0; i < n; ++i)
    if (p[i] != value) return static_cast<int64_t>(i);
  return -1;
}

RemoteStall::RemoteStall(Agent& target) {
  thread_ = std::thread([this, &target] {
    auto lock = target.impl()->context().registry->LockExclusive();
    std::unique_lock l(mu_);
    held_ = true;
    cv_.notify_all();
    cv_.wait(l, [this] { return release_; });
  });
  std::unique_lock l(mu_);
  cv_.wait(l, [this] { return held_; });
}

void RemoteStall::Release() {
  {
    std::lock_guard l(mu_);
    release_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

Status LatchPeer(Agent& a, const std::string& peer, const Status& s) {
  KVLANE_ASSIGN_OR_RETURN(core::Channel * ch, a.impl()->PeerChannel(peer));
  ch->latch().Latch(s);
  return Status::Ok();
}

std::vector<Notification> TakeAtLeast(Agent& agent, size_t n, std::chrono::milliseconds timeout) {
  std::vector<Notification> got;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (got.size() < n && std::chrono::steady_clock::now() < deadline) {
    for (auto& x : agent.TakeNotifications()) got.push_back(std::move(x));
    if (got.size() < n) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return got;
}

Guarded::Guarded(uint64_t b, uint64_t g, uint8_t s)
    : buf(b + 2 * g, s), bytes(b), guard(g), sentinel(s) {}

bool Guarded::GuardsIntact() const {
  return FirstNot(buf.data(), guard, sentinel) < 0 &&
         FirstNot(buf.data() + guard + bytes, guard, sentinel) < 0;
}

}  // namespace kvlane::test
