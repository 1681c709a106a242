// Faults: a peer region deregistered under a prepared list, a fatal error
// latched on the channel (before posting, and with work queued behind it).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "test_util.h"
#include "two_agents.h"

namespace kvlane::test {
namespace {

using namespace std::chrono_literals;

class LatchTest : public TwoAgents {
 protected:
  // Registers `local` on a and `remote` on b, whole, and loads b into a; `lid` is
  // a's region.
  void RegisterBoth(std::vector<uint8_t>& local, std::vector<uint8_t>& remote, RegionId* lid) {
    auto id = a().RegisterMemory(local.data(), local.size());
    ASSERT_TRUE(id.ok()) << id.status().ToString();
    *lid = id.value();
    ASSERT_TRUE(b().RegisterMemory(remote.data(), remote.size()).ok());
    Connect(a(), b());
  }
};

bool IsStale(Code c) { return c == Code::kRemoteStale || c == Code::kBackend; }

// b deregisters a region that a's prepared lists still name: READ and WRITE
// fail with a stale-region error, nothing moves, the handles release, and the
// channel stays healthy for b's other region.
TEST_P(LatchTest, DeregisteredPeerRegionFailsStaleAndReleases) {
  constexpr uint64_t kSize = 1 << 20;
  auto& src = bufs_.Make(kSize);
  auto& back = bufs_.Make(kSize, 0xCC);
  auto& gone = bufs_.Make(kSize, 0xEE);
  auto& live = bufs_.Make(kSize, 0xEE);
  Fill(src, 4);
  ASSERT_TRUE(a().RegisterMemory(src.data(), kSize).ok());
  ASSERT_TRUE(a().RegisterMemory(back.data(), kSize).ok());
  auto gone_id = b().RegisterMemory(gone.data(), kSize);
  ASSERT_TRUE(gone_id.ok());
  ASSERT_TRUE(b().RegisterMemory(live.data(), kSize).ok());
  Connect(a(), b());
  auto rd = MakeSimple(a(), "b", Op::kRead, back.data(), gone.data(), kSize);
  auto wr = MakeSimple(a(), "b", Op::kWrite, src.data(), gone.data(), kSize);
  ASSERT_TRUE(rd.ok() && wr.ok());

  ASSERT_TRUE(b().DeregisterMemory(gone_id.value()).ok());
  EXPECT_EQ(b().DeregisterMemory(gone_id.value()).code(), Code::kNotFound);
  Status s = PostAndWait(a(), &rd.value());
  EXPECT_TRUE(IsStale(s.code())) << s.ToString();
  EXPECT_EQ(a().Check(rd.value()).code(), s.code());
  s = PostAndWait(a(), &wr.value());
  EXPECT_TRUE(IsStale(s.code())) << s.ToString();
  EXPECT_EQ(FirstNot(back.data(), kSize, 0xCC), -1) << "stale READ moved bytes";
  EXPECT_EQ(FirstNot(gone.data(), kSize, 0xEE), -1) << "stale WRITE moved bytes";
  EXPECT_TRUE(a().Release(&rd.value()).ok());
  EXPECT_TRUE(a().Release(&wr.value()).ok());

  EXPECT_TRUE(a().PeerError("b").ok()) << "a stale region is not a fatal lane error";
  auto ok = MakeSimple(a(), "b", Op::kWrite, src.data(), live.data(), kSize);
  ASSERT_TRUE(ok.ok());
  ASSERT_TRUE(PostAndWait(a(), &ok.value()).ok());
  EXPECT_EQ(FirstMismatch(live.data(), kSize, 4), -1);

  // Fresh metadata no longer lists the region: preparing against it fails early.
  Connect(a(), b());
  DescList r;
  r.Add(gone.data(), kSize);
  EXPECT_EQ(a().PrepareRemote("b", r).status().code(), Code::kInvalidArgument);
}

// One thread posts a transfer that fails every time (its peer region is gone)
// again and again, publishing its handle after each post; another Checks copies
// of that handle all along. Each Check says the post's own error with its
// message, in flight, or stale (kNotFound) once the copy was re-posted: never a
// torn or foreign message, and no data race on it (TSan: the message was a plain
// string that the next post's error replaced under the reader).
TEST_P(LatchTest, CheckOfACopyWhileTheOwnerRepostsReadsWholeMessages) {
  constexpr uint64_t kSize = 4096;
  auto& back = bufs_.Make(kSize, 0xCC);
  auto& gone = bufs_.Make(kSize, 0xEE);
  ASSERT_TRUE(a().RegisterMemory(back.data(), kSize).ok());
  auto gone_id = b().RegisterMemory(gone.data(), kSize);
  ASSERT_TRUE(gone_id.ok());
  Connect(a(), b());
  auto rd = MakeSimple(a(), "b", Op::kRead, back.data(), gone.data(), kSize);
  ASSERT_TRUE(rd.ok());
  ASSERT_TRUE(b().DeregisterMemory(gone_id.value()).ok());
  XferHandle h = rd.value();
  Status first = PostAndWait(a(), &h);
  ASSERT_TRUE(IsStale(first.code())) << first.ToString();
  const std::string expected = first.message();
  std::atomic<uint64_t> published{uint64_t{h.gen} << 32 | h.slot};
  std::atomic<bool> stop{false};
  std::atomic<int> errors_read{0}, bad{0};
  std::thread reader([&] {
    while (!stop.load()) {
      const uint64_t v = published.load();
      const XferHandle copy{static_cast<uint32_t>(v), static_cast<uint32_t>(v >> 32)};
      const Status s = a().Check(copy);
      std::this_thread::yield();  // two cores: leave room for the poster and its lane
      if (s.in_progress() || s.code() == Code::kNotFound) continue;
      ++errors_read;
      bad += !IsStale(s.code()) || s.message() != expected;
    }
  });
  for (int i = 0; i < 600; ++i) {
    const Status s = PostAndWait(a(), &h);
    ASSERT_TRUE(IsStale(s.code())) << i << ": " << s.ToString();
    published.store(uint64_t{h.gen} << 32 | h.slot);
    if (i % 4 == 0) std::this_thread::sleep_for(100us);  // lets the reader find it finished
  }
  // On a loaded machine the reader may not have run in any gap between posts.
  // The last post has finished and is not re-posted: a Check of the published
  // handle now says its error, so the reader reads one once it runs at all.
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (errors_read.load() == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(1ms);
  stop = true;
  reader.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_GT(errors_read.load(), 0) << "the reader never saw a finished post";
  EXPECT_EQ(FirstNot(back.data(), kSize, 0xCC), -1);
  EXPECT_TRUE(a().Release(&h).ok());
}

// a deregisters its own memory that a transfer's (or a prepared list's) local
// side names: the next Post is refused with kInvalidArgument naming the local
// region, the handle stays valid and releasable, and no byte moves on either
// side (a READ would write into memory no longer registered). MakeTransfer from
// the prepared list is refused the same way. The same memory registered again
// is a new region: the old transfer stays refused, a new one works.
TEST_P(LatchTest, DeregisteredLocalRegionFailsAtPostAndMovesNothing) {
  constexpr uint64_t kSize = 64 << 10;
  auto& local = bufs_.Make(kSize, 0xCC);
  auto& remote = bufs_.Make(kSize, 0xEE);
  RegionId lid;
  ASSERT_NO_FATAL_FAILURE(RegisterBoth(local, remote, &lid));
  DescList l, r;
  l.Add(local.data(), kSize);
  r.Add(remote.data(), kSize);
  auto lp = a().PrepareLocal(l);
  auto rp = a().PrepareRemote("b", r);
  ASSERT_TRUE(lp.ok() && rp.ok());
  auto rd = a().MakeTransfer(Op::kRead, lp.value(), {}, rp.value(), {});
  auto wr = a().MakeTransfer(Op::kWrite, lp.value(), {}, rp.value(), {});
  ASSERT_TRUE(rd.ok() && wr.ok());
  ASSERT_TRUE(PostAndWait(a(), &rd.value()).ok()) << "the READ works while registered";
  std::fill(local.begin(), local.end(), 0xCC);

  ASSERT_TRUE(a().DeregisterMemory(lid).ok());
  Fill(remote, 5);  // what a READ would bring
  Fill(local, 6);   // what a WRITE would send
  std::vector<uint8_t> sent(local);
  for (XferHandle* h : {&rd.value(), &wr.value()}) {
    const XferHandle before = *h;
    Status s = a().Post(h);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
    EXPECT_NE(s.message().find("local region"), std::string::npos) << s.message();
    EXPECT_EQ(h->gen, before.gen) << "a refused post must leave the handle unchanged";
    EXPECT_NE(a().Check(*h).code(), Code::kInProgress);
  }
  auto again = a().MakeTransfer(Op::kRead, lp.value(), {}, rp.value(), {});
  EXPECT_EQ(again.status().code(), Code::kInvalidArgument) << again.status().ToString();
  EXPECT_TRUE(local == sent) << "a READ wrote into deregistered memory";
  EXPECT_EQ(FirstMismatch(remote.data(), kSize, 5), -1) << "a WRITE moved deregistered bytes";

  ASSERT_TRUE(a().RegisterMemory(local.data(), kSize).ok());
  EXPECT_EQ(a().Post(&rd.value()).code(), Code::kInvalidArgument)
      << "a new registration is a new region";
  EXPECT_TRUE(local == sent);
  auto fresh = MakeSimple(a(), "b", Op::kRead, local.data(), remote.data(), kSize);
  ASSERT_TRUE(fresh.ok()) << fresh.status().ToString();
  ASSERT_TRUE(PostAndWait(a(), &fresh.value()).ok());
  EXPECT_EQ(FirstMismatch(local.data(), kSize, 5), -1);
  EXPECT_TRUE(a().Release(&rd.value()).ok());
  EXPECT_TRUE(a().Release(&wr.value()).ok());
  EXPECT_TRUE(a().Release(&fresh.value()).ok());
}

// a deregisters its own memory while a READ into it is in flight: the call
// returns only once that READ ended (its record is terminal), and after it no
// byte of the memory changes, so the caller may free it.
TEST_P(LatchTest, DeregisterWaitsForOwnTransferInFlight) {
  constexpr uint64_t kSize = 32 << 20;
  auto& local = bufs_.Make(kSize, 0xCC);
  auto& remote = bufs_.Make(kSize, 0xEE);
  Fill(remote, 8);
  ASSERT_TRUE(b().RegisterMemory(remote.data(), kSize).ok());
  int caught_in_flight = 0;
  for (int attempt = 0; attempt < 6 && caught_in_flight < 2; ++attempt) {
    SCOPED_TRACE(attempt);
    auto lid = a().RegisterMemory(local.data(), kSize);
    ASSERT_TRUE(lid.ok());
    Connect(a(), b());
    auto rd = MakeSimple(a(), "b", Op::kRead, local.data(), remote.data(), kSize);
    ASSERT_TRUE(rd.ok()) << rd.status().ToString();
    XferHandle h = rd.value();
    ASSERT_FALSE(a().Post(&h).is_error());
    caught_in_flight += a().Check(h).in_progress();
    ASSERT_TRUE(a().DeregisterMemory(lid.value()).ok());
    const Status end = a().Check(h);
    EXPECT_FALSE(end.in_progress()) << "DeregisterMemory returned with its READ in flight";
    std::memset(local.data(), 0xD5, kSize);  // the caller's memory again
    std::this_thread::sleep_for(20ms);
    EXPECT_EQ(FirstNot(local.data(), kSize, 0xD5), -1) << "written after DeregisterMemory returned";
    EXPECT_TRUE(a().Wait(h, 10s).ok());
    EXPECT_TRUE(a().Release(&h).ok());
  }
  EXPECT_GE(caught_in_flight, 1) << "no post was still in flight at DeregisterMemory";
}

// Many READs into one region queue on one healthy lane, far longer than 2 x
// io_timeout in all: DeregisterMemory waits for every one (it once gave up
// after 2 x io_timeout with kTimeout, and the region was gone, so a second
// call said kNotFound and the caller could not wait any more).
TEST_P(LatchTest, DeregisterWaitsOutABusyHealthyLane) {
  AgentOptions o;
  o.io_timeout = std::chrono::milliseconds(250);
  o.lanes_per_peer = 1;
  ASSERT_NO_FATAL_FAILURE(MakeAgents(o, /*connect=*/false));
  constexpr uint64_t kSize = 16 << 20;
  constexpr int kReads = 64;
  auto& local = bufs_.Make(kSize, 0xCC);
  auto& remote = bufs_.Make(kSize, 0xEE);
  RegionId lid;
  ASSERT_NO_FATAL_FAILURE(RegisterBoth(local, remote, &lid));
  std::vector<XferHandle> hs;
  for (int i = 0; i < kReads; ++i) {
    auto h = MakeSimple(a(), "b", Op::kRead, local.data(), remote.data(), kSize);
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    hs.push_back(h.value());
  }
  for (auto& h : hs) ASSERT_FALSE(a().Post(&h).is_error());
  const Status d = a().DeregisterMemory(lid);
  int in_flight = 0;
  for (auto& h : hs) in_flight += a().Check(h).in_progress();
  EXPECT_TRUE(d.ok()) << d.ToString();
  EXPECT_EQ(in_flight, 0) << "DeregisterMemory returned with READs into the region in flight";
  int ok = 0;
  for (auto& h : hs) ok += a().Wait(h, 30s).ok();
  EXPECT_EQ(ok, kReads) << "the lane was healthy: every READ ends ok";
  for (auto& h : hs) EXPECT_TRUE(a().Release(&h).ok());
}

// Posts refused because their local region is gone, over and over, while another
// thread Checks a copy of the (current) handle: the copy never reads stale. A
// refused post once stored its in-flight record and then restored the old one.
TEST_P(LatchTest, RefusedPostsLeaveACurrentCopyCurrent) {
  constexpr uint64_t kSize = 4096;
  auto& local = bufs_.Make(kSize, 0xCC);
  auto& remote = bufs_.Make(kSize, 0xEE);
  RegionId lid;
  ASSERT_NO_FATAL_FAILURE(RegisterBoth(local, remote, &lid));
  auto rd = MakeSimple(a(), "b", Op::kRead, local.data(), remote.data(), kSize);
  ASSERT_TRUE(rd.ok());
  XferHandle h = rd.value();
  ASSERT_TRUE(PostAndWait(a(), &h).ok());
  ASSERT_TRUE(a().DeregisterMemory(lid).ok());
  const XferHandle copy = h;
  std::atomic<bool> stop{false};
  std::atomic<int> reads{0}, stale{0};
  std::thread reader([&] {
    while (!stop.load()) {
      ++reads;
      stale += a().Check(copy).code() == Code::kNotFound;
    }
  });
  for (int i = 0; i < 100000; ++i) {
    ASSERT_EQ(a().Post(&h).code(), Code::kInvalidArgument);
    ASSERT_EQ(h.gen, copy.gen);
  }
  stop = true;
  reader.join();
  EXPECT_EQ(stale.load(), 0) << "of " << reads.load() << " Checks of a current handle";
  EXPECT_TRUE(a().Check(copy).ok());
  EXPECT_TRUE(a().Release(&h).ok());
}

// b deregisters the region a WRITE posted a moment before lands in: the WRITE
// ends kOk, having moved its own bytes (each post sends new ones, so an ok that
// moved nothing reads wrong), or stale; and once DeregisterMemory returned no
// byte of the region changes (it waited for the access in flight).
TEST_P(LatchTest, DeregisterWaitsForAccessInFlight) {
  constexpr uint64_t kSize = 1 << 20;
  constexpr uint64_t kRounds = 20;
  auto& src = bufs_.Make(kSize);
  auto& dst = bufs_.Make(kSize, 0);
  ASSERT_TRUE(a().RegisterMemory(src.data(), kSize).ok());
  int ok = 0, stale = 0;
  for (uint64_t round = 1; round <= kRounds; ++round) {
    SCOPED_TRACE(round);
    auto id = b().RegisterMemory(dst.data(), kSize);
    ASSERT_TRUE(id.ok());
    Connect(a(), b());
    auto h = MakeSimple(a(), "b", Op::kWrite, src.data(), dst.data(), kSize);
    ASSERT_TRUE(h.ok());
    Fill(src, 2 * round);  // on the live region the post moves every byte
    ASSERT_TRUE(PostAndWait(a(), &h.value()).ok());
    ASSERT_EQ(FirstMismatch(dst.data(), kSize, 2 * round), -1);
    Fill(src, 2 * round + 1);  // the racing post's own bytes
    ASSERT_FALSE(a().Post(&h.value()).is_error());
    // Odd rounds deregister at once (the post mostly stale), even ones after 0.1 to 1 ms.
    if (round % 2 == 0) std::this_thread::sleep_for(std::chrono::microseconds(50 * round));
    ASSERT_TRUE(b().DeregisterMemory(id.value()).ok());
    const std::vector<uint8_t> at_deregister(dst);  // not to change from here on
    const Status s = a().Wait(h.value(), 10s);
    // Either it ran before the deregistration (then completely) or after (stale).
    if (s.ok()) {
      ++ok;
      EXPECT_EQ(FirstMismatch(dst.data(), kSize, 2 * round + 1), -1) << "ok without its bytes";
    } else {
      ++stale;
      EXPECT_TRUE(IsStale(s.code())) << s.ToString();
    }
    EXPECT_TRUE(dst == at_deregister) << "written after DeregisterMemory returned";
    EXPECT_TRUE(a().Release(&h.value()).ok());
  }
  std::printf("[ info ] %s: %d ok, %d stale of %d\n", GetParam().c_str(), ok, stale,
              static_cast<int>(kRounds));
}

// A fatal error latched before posting: the transfer (with its notification)
// and a standalone notification are refused; the handle stays the caller's
// (valid, releasable); the receiver's bytes and notification list are untouched.
TEST_P(LatchTest, LatchedErrorRejectsPostAndNotification) {
  constexpr uint64_t kSize = 64 << 10;
  auto& src = bufs_.Make(kSize);
  auto& dst = bufs_.Make(kSize, 0xEE);
  Fill(src, 2);
  ASSERT_TRUE(a().RegisterMemory(src.data(), kSize).ok());
  ASSERT_TRUE(b().RegisterMemory(dst.data(), kSize).ok());
  Connect(a(), b());
  auto h = MakeSimple(a(), "b", Op::kWrite, src.data(), dst.data(), kSize, "coupled");
  ASSERT_TRUE(h.ok());
  XferHandle handle = h.value();
  ASSERT_TRUE(LatchPeer(a(), "b", Status::Backend("injected lane failure")).ok());

  EXPECT_EQ(a().PeerError("b").code(), Code::kBackend);
  XferHandle before = handle;
  Status s = a().Post(&handle);
  EXPECT_EQ(s.code(), Code::kBackend) << s.ToString();
  EXPECT_EQ(handle.slot, before.slot);
  EXPECT_EQ(handle.gen, before.gen) << "a refused post must leave the handle unchanged";
  Status c = a().Check(handle);
  EXPECT_NE(c.code(), Code::kNotFound) << "handle went stale: " << c.ToString();
  EXPECT_NE(c.code(), Code::kInProgress);
  EXPECT_EQ(a().SendNotification("b", "standalone").code(), Code::kBackend);
  EXPECT_EQ(a().Post(&handle).code(), Code::kBackend) << "latched for every later post";
  EXPECT_TRUE(a().Release(&handle).ok());
  EXPECT_FALSE(handle.valid());

  std::this_thread::sleep_for(100ms);
  EXPECT_TRUE(b().TakeNotifications().empty());
  EXPECT_EQ(FirstNot(dst.data(), kSize, 0xEE), -1) << "receiver sentinel changed";
}

// Work queued behind a latched error aborts: a 64 MiB WRITE in 4 KiB chunks
// fills the lane (the stalled target stops its progress), a small WRITE with a
// notification waits behind it, then the channel latches. The small one ends
// with the latched error and its target bytes stay untouched; nothing hangs.
TEST_P(LatchTest, LatchAbortsWorkQueuedBehind) {
  AgentOptions o;
  o.lanes_per_peer = 1;
  o.chunk_bytes = 4096;
  o.lane_ring_slots = 1 << 15;
  MakeAgents(o);
  constexpr uint64_t kBig = 64 << 20, kSmall = 4096;
  auto& src = bufs_.Make(kBig);
  auto& dst = bufs_.Make(kBig);
  auto& small_dst = bufs_.Make(kSmall, 0xEE);
  ASSERT_TRUE(a().RegisterMemory(src.data(), kBig).ok());
  ASSERT_TRUE(b().RegisterMemory(dst.data(), kBig).ok());
  ASSERT_TRUE(b().RegisterMemory(small_dst.data(), kSmall).ok());
  Connect(a(), b());
  auto big = MakeSimple(a(), "b", Op::kWrite, src.data(), dst.data(), kBig);
  auto small = MakeSimple(a(), "b", Op::kWrite, src.data(), small_dst.data(), kSmall, "small");
  ASSERT_TRUE(big.ok() && small.ok());
  {
    RemoteStall stall(b());
    ASSERT_FALSE(a().Post(&big.value()).is_error());
    ASSERT_FALSE(a().Post(&small.value()).is_error());
    ASSERT_TRUE(LatchPeer(a(), "b", Status::Backend("injected lane failure")).ok());
  }
  auto t0 = std::chrono::steady_clock::now();
  Status bs = a().Wait(big.value(), 20s);
  Status ss = a().Wait(small.value(), 20s);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 15s);
  EXPECT_TRUE(bs.ok() || bs.code() == Code::kBackend) << bs.ToString();
  EXPECT_EQ(ss.code(), Code::kBackend) << ss.ToString();
  EXPECT_EQ(FirstNot(small_dst.data(), kSmall, 0xEE), -1);
  std::this_thread::sleep_for(50ms);
  EXPECT_TRUE(b().TakeNotifications().empty());
  EXPECT_TRUE(a().Release(&big.value()).ok());
  EXPECT_TRUE(a().Release(&small.value()).ok());
}

INSTANTIATE_TEST_SUITE_P(Transports, LatchTest, ::testing::Values("local", "shm", "tcp"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace kvlane::test
