// Faults: deregistration racing remote transfers, a peer that stops reading, and
// one that stops half way through a reply. (A peer killed with SIGKILL is covered
// by tests/ elsewhere.)
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <fstream>
#include <future>
#include <random>
#include <thread>

#include "core/random.h"
#include "raw_peer.h"
#include "scripted_target.h"
#include "test_util.h"

namespace kvlane::test {
namespace {

using namespace std::chrono_literals;

class DeregisterInFlightTest : public ::testing::TestWithParam<std::string> {};

// The target deregisters while the initiator's READs and WRITEs run. Each ends
// kOk or kRemoteStale, never anything else; after DeregisterMemory returns no
// byte of the old region changes, and nothing around it ever does.
TEST_P(DeregisterInFlightTest, EndsOkOrStaleAndNeverWritesAfterDeregister) {
  constexpr uint64_t kLen = 4 << 20, kGuard = 64 << 10;
  AgentOptions o;
  o.chunk_bytes = 256 << 10;  // 16 chunks striped over the lanes: some land, some go stale
  o.lanes_per_peer = 4;
  GuardedBuffer target(kLen, kGuard, 21), local(kLen, kGuard, 22);  // outlive the agents
  Pair p = MakePair(GetParam(), o);
  Agent& a = *p.a;
  Agent& b = *p.b;
  ASSERT_TRUE(a.RegisterMemory(local.body(), kLen).ok());
  std::mt19937 rng(5);
  int ok = 0, stale = 0;
  const int kIters = 40;
  for (int it = 0; it < kIters; ++it) {
    SCOPED_TRACE(it);
    target.ResetBody();
    auto rid = b.RegisterMemory(target.body(), kLen);
    ASSERT_TRUE(rid.ok());
    ASSERT_TRUE(a.LoadPeer(b.ExportMetadata().value()).ok());
    DescList l, r;
    l.Add(local.body(), kLen);
    r.Add(target.body(), kLen);
    auto pl = a.PrepareLocal(l);
    auto pr = a.PrepareRemote("b", r);
    ASSERT_TRUE(pl.ok() && pr.ok()) << pr.status().ToString();
    const Op op = it % 2 ? Op::kRead : Op::kWrite;
    auto h = a.MakeTransfer(op, pl.value(), {}, pr.value(), {});
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    XferHandle x = h.value();
    ASSERT_FALSE(a.Post(&x).is_error());
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 3000));
    ASSERT_TRUE(b.DeregisterMemory(rid.value()).ok());
    // From here on the region is not ours to serve: mark it and watch it.
    std::memset(target.body(), 0xD5, kLen);
    Status s = a.Wait(x, 20s);
    ASSERT_TRUE(s.ok() || s.code() == Code::kRemoteStale) << s.ToString();
    (s.ok() ? ok : stale)++;
    for (uint64_t i = 0; i < kLen; i += 1) {
      if (target.body()[i] != 0xD5) FAIL() << "byte " << i << " written after DeregisterMemory returned";
    }
    EXPECT_TRUE(target.GuardsIntact());
    EXPECT_TRUE(local.GuardsIntact());
    EXPECT_TRUE(a.PeerError("b").ok()) << "a stale region must not break the connection";
    EXPECT_TRUE(a.Release(&x).ok());
    EXPECT_TRUE(a.ReleasePrepared(pl.value()).ok());
    EXPECT_TRUE(a.ReleasePrepared(pr.value()).ok());
  }
  std::printf("[ info ] %s: %d completed, %d stale of %d\n", GetParam().c_str(), ok, stale, kIters);
}

// Which MiB of `b` hold `written` at their first byte, read without TSan's
// instrumentation: the test watches a copy that another thread (or the
// kernel) is making into `b`, on purpose.
__attribute__((no_sanitize("thread"))) std::vector<bool> Written(const uint8_t* b, uint64_t len,
                                                                 uint8_t written) {
  const volatile uint8_t* at = b;  // read each time, never cached
  std::vector<bool> out;
  for (uint64_t i = 0; i < len; i += 1 << 20) out.push_back(at[i] == written);
  return out;
}
bool Any(const std::vector<bool>& v) { return std::find(v.begin(), v.end(), true) != v.end(); }
bool All(const std::vector<bool>& v) { return std::find(v.begin(), v.end(), false) == v.end(); }

// The test above deregisters after a random delay, so a DeregisterMemory that
// did not wait for a copy in flight fails it only now and then. Here the target
// watches its region and deregisters while a copy into it is half done (one
// 128 MiB chunk: milliseconds to go). DeregisterMemory must wait for it: no
// byte may change once it has returned.
TEST_P(DeregisterInFlightTest, DeregisterInTheMiddleOfACopyWaitsForIt) {
  constexpr uint64_t kLen = 128ull << 20;
  constexpr uint8_t kWritten = 0x5A;
  AgentOptions o;
  o.chunk_bytes = kLen;  // one chunk, one hold of the registry
  o.lanes_per_peer = 1;
  std::vector<uint8_t> src(kLen, kWritten), dst(kLen);  // outlive the agents
  Pair p = MakePair(GetParam(), o);
  Agent& a = *p.a;
  Agent& b = *p.b;
  ASSERT_TRUE(a.RegisterMemory(src.data(), kLen).ok());
  int caught = 0;
  for (int attempt = 0; attempt < 10 && caught == 0; ++attempt) {
    SCOPED_TRACE(attempt);
    std::fill(dst.begin(), dst.end(), 0);
    auto rid = b.RegisterMemory(dst.data(), kLen);
    ASSERT_TRUE(rid.ok());
    ASSERT_NO_FATAL_FAILURE(Connect(a, b));
    auto h = MakeSimple(a, "b", Op::kWrite, src.data(), dst.data(), kLen);
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    XferHandle x = h.value();
    ASSERT_FALSE(a.Post(&x).is_error());
    std::vector<bool> before;
    const auto give_up = std::chrono::steady_clock::now() + 10s;
    while (!Any(before = Written(dst.data(), kLen, kWritten)) &&
           std::chrono::steady_clock::now() < give_up) {
    }
    ASSERT_TRUE(Any(before)) << "the copy never began";
    ASSERT_TRUE(b.DeregisterMemory(rid.value()).ok());
    const std::vector<bool> at_return = Written(dst.data(), kLen, kWritten);
    Status s = a.Wait(x, 20s);
    ASSERT_TRUE(s.ok() || s.code() == Code::kRemoteStale) << s.ToString();
    ASSERT_EQ(Written(dst.data(), kLen, kWritten), at_return)
        << "bytes written after DeregisterMemory returned";
    caught += All(before) ? 0 : 1;  // a round that deregistered after the copy proves nothing
    EXPECT_TRUE(a.Release(&x).ok());  // its prepared lists go with the agent
  }
  EXPECT_EQ(caught, 1) << "no round deregistered in the middle of the copy";
}

INSTANTIATE_TEST_SUITE_P(Transports, DeregisterInFlightTest, ::testing::Values("local", "shm", "tcp"),
                         [](const auto& info) { return info.param; });

// The stalled peer's requests end with the io_timeout latch; meanwhile the same
// agent keeps completing transfers to a healthy peer, and its memory stays flat
// (tcp gathers straight from registered memory: nothing is buffered per request).
TEST(SlowPeerTest, StalledPeerTimesOutOthersUnaffectedMemoryBounded) {
  constexpr uint64_t kBig = 64 << 20, kSmall = 64 << 10;
  ScriptedTarget stalled(/*answer=*/nullptr, "stalled");  // never reads after the Hello
  AgentOptions o = OptionsFor("a", "tcp");
  o.io_timeout = 2000ms;
  o.chunk_bytes = 1 << 20;
  auto a_or = Agent::Create(o);
  auto c_or = Agent::Create(OptionsFor("c", "tcp"));
  ASSERT_TRUE(a_or.ok() && c_or.ok());
  Agent& a = *a_or.value();
  Agent& c = *c_or.value();
  std::vector<uint8_t> big(kBig), small(kSmall), at_c(kSmall);
  Fill(big, 1);
  Fill(small, 2);
  ASSERT_TRUE(a.RegisterMemory(big.data(), kBig).ok());
  ASSERT_TRUE(a.RegisterMemory(small.data(), kSmall).ok());
  ASSERT_TRUE(c.RegisterMemory(at_c.data(), kSmall).ok());
  ASSERT_TRUE(a.LoadPeer(stalled.Blob()).ok());
  ASSERT_TRUE(a.LoadPeer(c.ExportMetadata().value()).ok());

  DescList lb, rb, ls, rc;
  lb.Add(big.data(), kBig);
  rb.Add(1ull << 40, kBig);
  ls.Add(small.data(), kSmall);
  rc.Add(at_c.data(), kSmall);
  auto plb = a.PrepareLocal(lb), prb = a.PrepareRemote("stalled", rb);
  auto pls = a.PrepareLocal(ls), prc = a.PrepareRemote("c", rc);
  ASSERT_TRUE(plb.ok() && prb.ok() && pls.ok() && prc.ok());
  std::vector<XferHandle> stuck;
  const uint64_t rss0 = RssBytes();
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 4; ++i) {
    auto h = a.MakeTransfer(Op::kWrite, plb.value(), {}, prb.value(), {});
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    stuck.push_back(h.value());
    ASSERT_FALSE(a.Post(&stuck.back()).is_error());
  }
  // The healthy peer keeps completing while 256 MiB sit in front of the stalled one.
  auto hc = a.MakeTransfer(Op::kWrite, pls.value(), {}, prc.value(), {});
  ASSERT_TRUE(hc.ok());
  XferHandle xc = hc.value();
  int done = 0;
  while (std::chrono::steady_clock::now() - t0 < 1500ms) {
    auto t = std::chrono::steady_clock::now();
    ASSERT_FALSE(a.Post(&xc).is_error());
    ASSERT_TRUE(a.Wait(xc, 5s).ok());
    EXPECT_LT(std::chrono::steady_clock::now() - t, 1s) << "the healthy peer waited on the stalled one";
    ++done;
  }
  EXPECT_EQ(FirstMismatch(at_c.data(), kSmall, 2), -1);
  for (XferHandle& h : stuck) {
    Status s = a.Wait(h, 10s);
    EXPECT_EQ(s.code(), Code::kTimeout) << s.ToString();
  }
  auto elapsed = std::chrono::steady_clock::now() - t0;
  EXPECT_LT(elapsed, o.io_timeout * 2 + 2s) << "the io_timeout latch must fire within bounds";
  const uint64_t rss1 = RssBytes();
  if (!kSanitized)
    EXPECT_LT(rss1, rss0 + (32ull << 20)) << "sender memory grew by " << (rss1 - rss0) / 1024 << " KiB";
  EXPECT_EQ(a.PeerError("stalled").code(), Code::kTimeout);
  EXPECT_TRUE(a.PeerError("c").ok());
  ASSERT_FALSE(a.Post(&xc).is_error());  // still healthy afterwards
  EXPECT_TRUE(a.Wait(xc, 5s).ok());
  std::printf("[ info ] %d healthy transfers during the stall; latch after %lld ms; rss %+lld KiB\n", done,
              static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count()),
              static_cast<long long>(rss1 - rss0) / 1024);
  for (XferHandle& h : stuck) EXPECT_TRUE(a.Release(&h).ok());
  EXPECT_TRUE(a.Release(&xc).ok());
}

// Answers the connection's first frame with part of its reply only — half the
// reply header, or for a READ the header and half the payload — and then says
// nothing more, keeping the connection open: a peer that hangs mid-reply, or
// whose host went away.
void AnswerHalf(int fd, const std::atomic<bool>&) {
  core::FrameHeader h{};
  if (!ReadFrame(fd, &h)) return;
  const bool read = h.type == static_cast<uint8_t>(core::FrameType::kRead);
  std::string out = ReplyBytes(h.ticket, read ? h.bytes : 0);
  if (read)
    out.append(h.bytes / 2, '\x61');
  else
    out.resize(sizeof(core::ReplyHeader) / 2);
  (void)core::SendAll(fd, out.data(), out.size());
}

// One `bytes` transfer of `op` to `target`, on one lane with io_timeout 1 s
// (and `chunk_bytes` when not 0): it must end with timeout within
// 2 x io_timeout + `slack`, latching timeout on the peer, not never.
void ExpectTransferTimesOut(ScriptedTarget& target, Op op, uint64_t bytes, uint64_t chunk_bytes,
                            std::chrono::milliseconds slack,
                            std::chrono::milliseconds io_timeout = 1000ms,
                            std::chrono::seconds keepalive = AgentOptions{}.tcp_keepalive) {
  AgentOptions o = OneLaneTcp(io_timeout);
  o.tcp_keepalive = keepalive;
  if (chunk_bytes != 0) o.chunk_bytes = chunk_bytes;
  auto a_or = Agent::Create(o);
  ASSERT_TRUE(a_or.ok());
  std::unique_ptr<Agent> a = std::move(a_or).value();
  std::vector<uint8_t> buf(bytes);
  ASSERT_TRUE(a->RegisterMemory(buf.data(), buf.size()).ok());
  ASSERT_TRUE(a->LoadPeer(target.Blob()).ok());
  auto h = MakeSimple(*a, target.name(), op, buf.data(), reinterpret_cast<void*>(1ull << 40),
                      buf.size());
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  XferHandle x = h.value();
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_FALSE(a->Post(&x).is_error());
  Status s = a->Wait(x, o.io_timeout * 2 + slack + 3s);
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_FALSE(a->Check(x).in_progress()) << "the request never ended: " << s.ToString();
  EXPECT_EQ(s.code(), Code::kTimeout) << s.ToString();
  EXPECT_LT(took, o.io_timeout * 2 + slack);
  EXPECT_EQ(a->PeerError(target.name()).code(), Code::kTimeout);
  target.Release();  // unblocks a hung receiver or sender, so that the agent can go either way
  EXPECT_TRUE(a->Release(&x).ok());
}

class HalfReplyTest : public ::testing::TestWithParam<Op> {};

// The peer stops half way through a reply (READ: its payload; WRITE: the reply
// header): the request ends with timeout within about io_timeout, not never, and
// the agent is destroyed at once.
TEST_P(HalfReplyTest, RequestEndsWithinTheIoTimeout) {
  ScriptedTarget half(AnswerHalf, "half");
  ExpectTransferTimesOut(half, GetParam(), 64 << 10, 0, 1s);
}

INSTANTIATE_TEST_SUITE_P(Ops, HalfReplyTest, ::testing::Values(Op::kRead, Op::kWrite),
                         [](const auto& info) {
                           return info.param == Op::kRead ? "Read" : "Write";
                         });

// The peer reads nothing after the handshake, and a WRITE's frame is larger
// than the sockets buffer: the lane's sender blocks in its send. The request
// ends with timeout within about io_timeout (the receiver counts a frame stuck
// in its send as work), not never.
TEST(DeafTarget, StuckSendEndsWithinTheIoTimeout) {
  ScriptedTarget deaf(/*answer=*/nullptr, "half");  // reads nothing after the Hello
  // One frame, far more than loopback buffers.
  ExpectTransferTimesOut(deaf, Op::kWrite, 64 << 20, 64 << 20, 2s);
}

// The same live peer that reads nothing, with a keepalive much shorter than the
// io timeout: the kernel's user timeout (Linux 5.11 on: also a receive window
// kept shut that long) must not end the lane first, as remote-disconnect after
// ~4 s; it fails by io_timeout with kTimeout (the user timeout is at least
// 2 x io_timeout + 1 s).
TEST(DeafTarget, ShortKeepaliveLeavesItToTheIoTimeout) {
  ScriptedTarget deaf(/*answer=*/nullptr, "half");  // reads nothing after the Hello
  ExpectTransferTimesOut(deaf, Op::kWrite, 64 << 20, 64 << 20, 2s, 6000ms, 1s);
}

// The peer acknowledges a notification with half a reply and then stalls:
// SendNotification returns within about io_timeout (it holds the channel's
// control connection, which a transfer's notification and the agent's
// destruction wait for).
TEST(HalfReplyNotification, SendNotificationEndsWithinTheIoTimeout) {
  ScriptedTarget half(AnswerHalf, "half");
  const AgentOptions o = OneLaneTcp(1000ms);
  auto a_or = Agent::Create(o);
  ASSERT_TRUE(a_or.ok());
  std::unique_ptr<Agent> a = std::move(a_or).value();
  ASSERT_TRUE(a->LoadPeer(half.Blob()).ok());
  const auto t0 = std::chrono::steady_clock::now();
  auto sent = std::async(std::launch::async, [&] { return a->SendNotification("half", "hello"); });
  const bool ended = sent.wait_for(o.io_timeout * 2 + 2s) == std::future_status::ready;
  EXPECT_TRUE(ended) << "SendNotification still blocked on half an acknowledgement";
  half.Release();  // unblocks it otherwise
  Status s = sent.get();
  if (ended) {
    EXPECT_EQ(s.code(), Code::kTimeout) << s.ToString();
    EXPECT_LT(std::chrono::steady_clock::now() - t0, o.io_timeout * 2 + 1s);
  }
}

// Sends a reply to a frame it was never sent, at once, then keeps the
// connection open and silent.
void AnswerUnasked(int fd, const std::atomic<bool>&) {
  const std::string out = ReplyBytes(0, 0);  // the ticket the lane expects next
  (void)core::SendAll(fd, out.data(), out.size());
}

// A reply for nothing sent is a protocol violation: the lane waits io_timeout
// for a sender that might just not have advanced its cursor yet, then latches
// kBackend. That wait must not keep a CPU busy (it yield-spun for all of it),
// with AgentOptions::spin 0 too (where it yields a few times before it sleeps).
TEST(UnsolicitedReply, LatchesAfterTheIoTimeoutWithoutSpinning) {
  ScriptedTarget target(AnswerUnasked, "unsolicited");
  for (const std::chrono::microseconds spin : {AgentOptions{}.spin, 0us}) {
    SCOPED_TRACE("spin " + std::to_string(spin.count()) + " us");
    AgentOptions o = OneLaneTcp(1500ms);
    o.spin = spin;
    auto a_or = Agent::Create(o);
    ASSERT_TRUE(a_or.ok());
    Agent& a = *a_or.value();
    ASSERT_TRUE(a.LoadPeer(target.Blob()).ok());
    const auto cpu0 = ProcessCpuTime();
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_TRUE(a.PeerTransport("unsolicited").ok());  // connects: the reply is waiting
    Status latched;
    while (latched.ok() && std::chrono::steady_clock::now() - t0 < o.io_timeout + 5s) {
      std::this_thread::sleep_for(10ms);
      latched = a.PeerError("unsolicited");
    }
    const auto wall = std::chrono::steady_clock::now() - t0;
    const auto cpu = ProcessCpuTime() - cpu0;
    EXPECT_EQ(latched.code(), Code::kBackend) << latched.ToString();
    EXPECT_NE(latched.message().find("reply out of order"), std::string::npos)
        << latched.ToString();
    EXPECT_GE(wall, o.io_timeout - 100ms);
    EXPECT_LT(cpu, wall / 4) << "the wait for a reply's request kept a CPU busy: "
                             << std::chrono::duration_cast<std::chrono::milliseconds>(cpu).count()
                             << " ms of CPU in "
                             << std::chrono::duration_cast<std::chrono::milliseconds>(wall).count()
                             << " ms";
  }
}

}  // namespace
}  // namespace kvlane::test
