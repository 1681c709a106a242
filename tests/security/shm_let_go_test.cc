// shm targets copy straight into (READ) and out of (WRITE) the initiator's
// memory (CMA), so a frame the initiator gave up on must not be copied after
// its request ended: the initiator's failed lane waits for the target to close
// it before its requests end (or leaves them poisoned when it does not), and
// the target copies nothing for an initiator that shut its end down.
//
// Each test holds the target's frame at the registry lock: a raw tcp peer
// stalls a WRITE frame half way (it holds the lock's shared side), and the
// target's DeregisterMemory of another region queues behind it (the lock lets
// no new frame in ahead of a waiting writer). Closing the raw peer lets go.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "core/agent_impl.h"
#include "raw_peer.h"
#include "test_util.h"

namespace kvlane::test {
namespace {

using namespace std::chrono_literals;
using core::FrameType;
using core::WireSeg;

constexpr uint64_t kLen = 64 << 10;

// The key of the target's piece that holds `p`.
uint64_t KeyOf(const TargetInfo& info, const void* p) {
  const auto a = reinterpret_cast<uint64_t>(p);
  for (const core::Piece& piece : info.meta.pieces)
    if (a >= piece.base && a - piece.base < piece.len) return piece.key;
  return 0;
}

// A target on shm and tcp whose frames wait at the registry lock until
// Release(): Hold() stalls a raw tcp WRITE frame and queues a DeregisterMemory.
class HeldTarget {
 public:
  explicit HeldTarget(std::chrono::milliseconds io_timeout, const std::string& name = "target") {
    AgentOptions o = OptionsFor(name, "shm");
    o.transports = {"shm", "tcp"};
    o.io_timeout = io_timeout;
    agent_ = Agent::Create(o).value();
    src_.assign(kLen, 0x11);
    other_.assign(kLen, 0);
    agent_->RegisterMemory(src_.data(), kLen).value();
    other_region_ = agent_->RegisterMemory(other_.data(), kLen).value();
    info_ = Inspect(agent_->ExportMetadata().value());
  }
  ~HeldTarget() { Release(); }

  Agent& agent() { return *agent_; }
  const TargetInfo& info() const { return info_; }
  uint8_t* src() { return src_.data(); }

  // Stalls a WRITE into src() after its segment table (no payload), then
  // starts DeregisterMemory of the other region, which waits behind it.
  void Hold() {
    stall_ = RawPeer::Connect("tcp", info_.meta);
    ASSERT_TRUE(stall_.has_value());
    ASSERT_EQ(stall_->Hello(info_.meta.agent_id, info_.meta.secret).value_or(-100), 0);
    const WireSeg seg{KeyOf(info_, src()), reinterpret_cast<uint64_t>(src()), 4096, 0};
    ASSERT_NE(seg.key, 0u);
    core::FrameHeader h{};
    h.type = static_cast<uint8_t>(FrameType::kWrite);
    h.nseg = 1;
    h.ticket = 0;
    h.bytes = seg.len;
    ASSERT_TRUE(stall_->Send(&h, sizeof(h)));
    ASSERT_TRUE(stall_->Send(&seg, sizeof(seg)));
    // The target's server thread reads the frame and takes the lock (a fixed
    // 200 ms was assumed once: too short on a busy host). Held twice 20 ms apart:
    // the frame's, not a passing lookup's.
    const core::Registry& registry = *agent_->impl()->context().registry;
    const auto until = std::chrono::steady_clock::now() + 10s;
    while (std::chrono::steady_clock::now() < until) {
      if (registry.LockHeld()) {
        std::this_thread::sleep_for(20ms);
        if (registry.LockHeld()) break;
      }
      std::this_thread::sleep_for(5ms);
    }
    deregistered_ =
        std::async(std::launch::async, [this] { return agent_->DeregisterMemory(other_region_); });
    // The deregistration waits (new frames queue behind it); one that ends now
    // means the stalled frame never held the lock, and every later step would
    // test nothing.
    ASSERT_EQ(deregistered_.wait_for(200ms), std::future_status::timeout)
        << "the stalled frame does not hold the target's registry lock";
  }
  // Closes the stalled frame's connection: the lock is let go.
  void Release() {
    stall_.reset();
    if (deregistered_.valid()) EXPECT_TRUE(deregistered_.get().ok());
  }

 private:
  std::vector<uint8_t> src_, other_;
  std::unique_ptr<Agent> agent_;
  RegionId other_region_{};
  TargetInfo info_;
  std::optional<RawPeer> stall_;
  std::future<Status> deregistered_;
};

// An shm initiator with io_timeout `io`, its buffer registered, and a READ of
// the target's src() into it made (over shm).
struct ReadingInitiator {
  // max_requests 0: the default.
  ReadingInitiator(HeldTarget& target, std::chrono::milliseconds io, uint32_t max_requests = 0)
      : dst(kLen, 0) {
    AgentOptions o = OptionsFor("init", "shm");
    o.io_timeout = io;
    if (max_requests != 0) o.max_requests = max_requests;
    agent = Agent::Create(o).value();
    local = agent->RegisterMemory(dst.data(), kLen).value();
    Connect(*agent, target.agent());
    x = MakeSimple(*agent, "target", Op::kRead, dst.data(), target.src(), kLen);
  }
  std::vector<uint8_t> dst;  // outlives the agent
  std::unique_ptr<Agent> agent;
  RegionId local{};
  Result<XferHandle> x = Status::Backend("not made");
};

// Holds the target's frames, posts `x`, has the target let go 1.2 s after the post
// (well inside the initiator's wait: io_timeout 0.5 s, then up to 2 x 0.5 s + 1 s)
// and waits for `x`: it timed out, and not before the target let go. Then runs
// `reuse` (the caller reuses its memory at once) and waits until the target is free.
template <typename Reuse>
void ExpectEndOnlyOnceLetGo(HeldTarget& target, Agent* init, XferHandle* x, Reuse reuse) {
  target.Hold();
  ASSERT_TRUE(init->Post(x).in_progress());
  std::thread release([&] {
    std::this_thread::sleep_for(1200ms);
    target.Release();
  });
  const auto t0 = std::chrono::steady_clock::now();
  const Status s = init->Wait(*x, 10s);
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(s.code(), Code::kTimeout) << s.ToString();
  EXPECT_GE(took, 1000ms) << "the transfer ended before the target let go of its frame";
  reuse();
  release.join();
  std::this_thread::sleep_for(500ms);  // whatever the target does now, it has done
}

// The initiator's lane times out while its READ frame waits at the target. The
// READ ends only once the target let go of the lane: whatever it does then, no
// byte of the initiator's buffer changes after the READ ended, and the memory
// may be deregistered (the request is not poisoned).
TEST(ShmLetGo, AFailedReadEndsOnlyOnceTheTargetLetGo) {
  HeldTarget target(3000ms);
  ReadingInitiator r(target, 500ms);
  Agent* init = r.agent.get();
  std::vector<uint8_t>& dst = r.dst;
  const RegionId local = r.local;
  auto& x = r.x;
  ASSERT_TRUE(x.ok()) << x.status().ToString();
  ASSERT_EQ(init->PeerTransport("target").value(), "shm");

  ExpectEndOnlyOnceLetGo(target, init, &*x, [&] { std::fill(dst.begin(), dst.end(), 0xee); });
  EXPECT_EQ(FirstNot(dst.data(), kLen, 0xee), -1) << "the target wrote after the READ ended";
  EXPECT_TRUE(init->DeregisterMemory(local).ok());
  EXPECT_TRUE(init->Release(&*x).ok());
}

// The same for a WRITE: the target copies out of the initiator's buffer itself,
// so the WRITE that timed out ends only once the target let go, and what the
// caller then puts in its buffer never reaches the target's memory.
TEST(ShmLetGo, AFailedWriteEndsOnlyOnceTheTargetLetGo) {
  HeldTarget target(3000ms);
  AgentOptions o = OptionsFor("init", "shm");
  o.io_timeout = 500ms;
  std::vector<uint8_t> src(4096, 0x22);  // outlives the agent
  auto init = Agent::Create(o).value();
  const RegionId local = init->RegisterMemory(src.data(), src.size()).value();
  Connect(*init, target.agent());
  uint8_t* dst = target.src() + 8192;  // apart from the stalled frame's range
  auto x = MakeSimple(*init, "target", Op::kWrite, src.data(), dst, src.size());
  ASSERT_TRUE(x.ok()) << x.status().ToString();
  ASSERT_EQ(init->PeerTransport("target").value(), "shm");

  ExpectEndOnlyOnceLetGo(target, init.get(), &*x, [&] { std::fill(src.begin(), src.end(), 0xee); });
  for (size_t i = 0; i < src.size(); ++i) {
    ASSERT_NE(dst[i], 0xee) << "the target copied the buffer after the WRITE ended, at " << i;
  }
  EXPECT_TRUE(init->DeregisterMemory(local).ok());
  EXPECT_TRUE(init->Release(&*x).ok());
}

// A target that holds the frame past the initiator's wait: the READ ends with
// its error saying the memory may still be copied, the request is poisoned
// (DeregisterMemory of its region fails with kBackend), and still no byte
// changes afterwards (the target sees the initiator's end shut: it copies nothing).
TEST(ShmLetGo, ATargetThatHoldsOnLeavesTheRequestPoisoned) {
  HeldTarget target(10000ms);
  ReadingInitiator r(target, 200ms);  // gives up after 0.2 s, then waits 2 x 0.2 s + 1 s
  Agent* init = r.agent.get();
  std::vector<uint8_t>& dst = r.dst;
  const RegionId local = r.local;
  auto& x = r.x;
  ASSERT_TRUE(x.ok()) << x.status().ToString();
  ASSERT_EQ(init->PeerTransport("target").value(), "shm");

  target.Hold();
  ASSERT_TRUE(init->Post(&*x).in_progress());
  const Status s = init->Wait(*x, 10s);
  EXPECT_EQ(s.code(), Code::kTimeout) << s.ToString();
  EXPECT_NE(s.message().find("may still copy"), std::string::npos) << s.ToString();
  std::fill(dst.begin(), dst.end(), 0xee);
  target.Release();
  std::this_thread::sleep_for(500ms);
  EXPECT_EQ(FirstNot(dst.data(), kLen, 0xee), -1) << "the target wrote after the READ ended";
  const Status d = init->DeregisterMemory(local);
  EXPECT_EQ(d.code(), Code::kBackend) << d.ToString();
  EXPECT_NE(d.message().find("shm target"), std::string::npos) << d.ToString();
}

// A poisoned transfer's slot stays taken after Release (its state may still be
// touched): with every slot so held, MakeTransfer's refusal says why.
TEST(ShmLetGo, APoisonedTransfersSlotStaysTakenAndTheRefusalSaysSo) {
  HeldTarget target(10000ms);
  ReadingInitiator r(target, 200ms, /*max_requests=*/1);
  ASSERT_TRUE(r.x.ok()) << r.x.status().ToString();
  ASSERT_EQ(r.agent->PeerTransport("target").value(), "shm");
  target.Hold();
  ASSERT_TRUE(r.agent->Post(&*r.x).in_progress());
  const Status s = r.agent->Wait(*r.x, 10s);
  ASSERT_EQ(s.code(), Code::kTimeout) << s.ToString();
  ASSERT_NE(s.message().find("may still copy"), std::string::npos) << s.ToString();
  EXPECT_TRUE(r.agent->Release(&*r.x).ok());
  auto again = MakeSimple(*r.agent, "target", Op::kRead, r.dst.data(), target.src(), kLen);
  EXPECT_EQ(again.status().code(), Code::kNotAllowed) << again.status().ToString();
  EXPECT_NE(again.status().message().find("1 of them held for good by transfers left poisoned"),
            std::string::npos)
      << again.status().ToString();
  target.Release();
}

// The same hold met by the agent's end, after RemovePeer("target") when
// `remove_peer`: Close() waits for the target as the destructor does, and, the
// target still holding on, says the memory must be kept (the destructor could not
// say it). A later Close() says it again.
void ExpectCloseKeepsTheMemory(bool remove_peer) {
  HeldTarget target(10000ms);
  ReadingInitiator r(target, 200ms);
  ASSERT_TRUE(r.x.ok()) << r.x.status().ToString();
  ASSERT_EQ(r.agent->PeerTransport("target").value(), "shm");
  target.Hold();
  ASSERT_TRUE(r.agent->Post(&*r.x).in_progress());
  std::this_thread::sleep_for(100ms);  // the frame is the target's
  if (remove_peer) ASSERT_TRUE(r.agent->RemovePeer("target").ok());
  const Status s = r.agent->Close();
  EXPECT_EQ(s.code(), Code::kBackend) << s.ToString();
  EXPECT_NE(s.message().find("do not free or reuse"), std::string::npos) << s.ToString();
  // The records stay too: a transport's device might still write the held post's.
  EXPECT_TRUE(r.agent->impl()->context().records->abandoned());
  EXPECT_EQ(r.agent->Close().code(), Code::kBackend);
  target.Release();
}

TEST(ShmLetGo, CloseSaysToKeepTheMemoryATargetStillHolds) { ExpectCloseKeepsTheMemory(false); }

// The finding: the peer removed (RemovePeer, or replaced by LoadPeer of a restarted
// peer) while its transfer still held the channel, Close() stopped only the channels
// of peers still loaded, decided what was held, and only then closed the removed
// peer's (as its last holder let go): kOk while the target might still copy. Every
// peer a request or a list still holds is closed before Close() decides.
TEST(ShmLetGo, CloseSaysToKeepTheMemoryAfterThePeerWasRemoved) { ExpectCloseKeepsTheMemory(true); }

// An agent whose transfers all ended closes with kOk: its memory may go.
TEST(ShmLetGo, CloseIsOkWhenNothingIsHeld) {
  HeldTarget target(3000ms);
  ReadingInitiator r(target, 500ms);
  ASSERT_TRUE(r.x.ok()) << r.x.status().ToString();
  ASSERT_TRUE(r.agent->Post(&*r.x).in_progress());
  ASSERT_TRUE(r.agent->Wait(*r.x, 10s).ok());
  const Status s = r.agent->Close();
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_FALSE(r.agent->impl()->context().records->abandoned());
}

// A raw shm initiator sends a READ frame that waits at the lock, then shuts its
// end down: the target copies nothing into its memory and answers canceled.
TEST(ShmLetGo, TheTargetCopiesNothingForAnInitiatorThatShutItsEnd) {
  HeldTarget target(3000ms);
  std::vector<uint8_t> dst(kLen, 0xee);
  auto p = RawPeer::Connect("shm", target.info().meta);
  ASSERT_TRUE(p.has_value());
  ASSERT_EQ(p->Hello(target.info().meta.agent_id, target.info().meta.secret).value_or(-100), 0);
  target.Hold();
  const WireSeg seg{KeyOf(target.info(), target.src()), reinterpret_cast<uint64_t>(target.src()),
                    kLen, reinterpret_cast<uint64_t>(dst.data())};
  ASSERT_TRUE(p->SendFrame(FrameType::kRead, 0, {seg}, kLen));
  std::this_thread::sleep_for(100ms);
  ASSERT_EQ(shutdown(p->fd(), SHUT_WR), 0);
  target.Release();
  const auto r = p->ReadReply(5s);
  ASSERT_TRUE(r.has_value()) << "no reply";
  EXPECT_EQ(r->status, static_cast<int32_t>(Code::kCanceled));
  EXPECT_EQ(FirstNot(dst.data(), kLen, 0xee), -1) << "the target copied for a shut initiator";
  EXPECT_TRUE(p->ClosedWithin(5s)) << "the target kept the connection after its end of file";
}

// An agent destroyed while READs wait at two shm targets that hold on: it shuts
// every lane before joining any, so both waits for the targets start at once and
// it takes one bound (2 x io_timeout + 1 s = 5 s). Closing one channel after the
// other took 7 s: the first waited its bound while the second's receiver gave up
// only at its own io_timeout (2 s) and then waited its bound. Nothing is copied
// into its memory afterwards (each target sees the end shut).
TEST(ShmLetGo, AnAgentsEndWaitsForAllItsShmTargetsAtOnce) {
  HeldTarget a(10000ms, "target-a"), b(10000ms, "target-b");
  std::vector<uint8_t> dst(2 * kLen, 0);  // outlives the agent
  AgentOptions o = OptionsFor("init", "shm");
  o.io_timeout = 2000ms;
  auto init = Agent::Create(o).value();
  ASSERT_TRUE(init->RegisterMemory(dst.data(), dst.size()).ok());
  Connect(*init, a.agent());
  Connect(*init, b.agent());
  auto xa = MakeSimple(*init, "target-a", Op::kRead, dst.data(), a.src(), kLen);
  auto xb = MakeSimple(*init, "target-b", Op::kRead, dst.data() + kLen, b.src(), kLen);
  ASSERT_TRUE(xa.ok() && xb.ok());
  ASSERT_EQ(init->PeerTransport("target-a").value(), "shm");
  ASSERT_EQ(init->PeerTransport("target-b").value(), "shm");
  a.Hold();
  b.Hold();
  ASSERT_TRUE(init->Post(&*xa).in_progress());
  ASSERT_TRUE(init->Post(&*xb).in_progress());
  // Both frames sent, each waiting at its target's lock; well inside io_timeout (2 s).
  std::this_thread::sleep_for(100ms);
  const auto t0 = std::chrono::steady_clock::now();
  init.reset();
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(took, 4500ms) << "the end did not wait for the targets";
  EXPECT_LT(took, 6000ms) << "the end waited for one target after the other";
  a.Release();
  b.Release();
  std::this_thread::sleep_for(500ms);
  EXPECT_EQ(FirstNot(dst.data(), dst.size(), 0), -1) << "a target wrote after the agent ended";
}

}  // namespace
}  // namespace kvlane::test
