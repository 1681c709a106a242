// Hostile tcp targets, seen from the initiator: a target the initiator chose to
// talk to (it holds its own blob, so it passes the handshake) answers in ways a
// kvlane target never would. None of them may make the initiator write memory a
// request does not write, nor hold a request (and the DeregisterMemory that
// waits for it) past its io_timeout bounds.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "raw_peer.h"
#include "scripted_target.h"
#include "test_util.h"

namespace kvlane::test {
namespace {

using namespace std::chrono_literals;

// Answers the connection's first frame a byte every `pace` (well inside the
// initiator's io_timeout: never silent that long): a READ's reply header at
// once and then its payload, any other reply from its first byte.
ScriptedTarget::Answer Trickle(std::chrono::milliseconds pace) {
  return [pace](int fd, const std::atomic<bool>& stop) {
    core::FrameHeader h{};
    if (!ReadFrame(fd, &h)) return;
    const bool read = h.type == static_cast<uint8_t>(core::FrameType::kRead);
    std::string out = ReplyBytes(h.ticket, read ? h.bytes : 0);
    if (read) {
      if (!core::SendAll(fd, out.data(), out.size()).ok()) return;
      out.assign(h.bytes, '\x61');
    }
    for (char byte : out) {
      std::this_thread::sleep_for(pace);
      if (stop || !core::SendAll(fd, &byte, 1).ok()) return;
    }
  };
}

// Answers the connection's first frame as if it were a READ: a successful reply
// carrying as many bytes of 0x66 as the frame moves, whatever its type.
void PayloadForAnyFrame(int fd, const std::atomic<bool>&) {
  core::FrameHeader h{};
  if (!ReadFrame(fd, &h)) return;
  std::string out = ReplyBytes(h.ticket, h.bytes);
  out.append(h.bytes, '\x66');
  (void)core::SendAll(fd, out.data(), out.size());
}

// Answers the connection's first frame with a bare successful reply: no
// payload, whatever the frame moves.
void BareReplyToAnyFrame(int fd, const std::atomic<bool>&) {
  core::FrameHeader h{};
  if (!ReadFrame(fd, &h)) return;
  const std::string out = ReplyBytes(h.ticket, 0);
  (void)core::SendAll(fd, out.data(), out.size());
}

// Answers the connection's first frame with a successful reply followed by 8
// bytes it did not ask for (as a READ's payload), whatever the frame was.
void ReplyWithEightBytes(int fd, const std::atomic<bool>&) {
  core::FrameHeader h{};
  if (!ReadFrame(fd, &h)) return;
  std::string out = ReplyBytes(h.ticket, 8);
  out.append(8, '\x66');
  (void)core::SendAll(fd, out.data(), out.size());
}

// A target that trickles its answers a byte every 300 ms, loaded by agent `a_`
// on one tcp lane with io_timeout 1 s.
class TricklingTarget : public ::testing::Test {
 protected:
  void SetUp() override {
    auto a_or = Agent::Create(o_);
    ASSERT_TRUE(a_or.ok());
    a_ = std::move(a_or).value();
    ASSERT_TRUE(a_->LoadPeer(target_.Blob()).ok());
  }

  ScriptedTarget target_{Trickle(300ms)};
  const AgentOptions o_ = OneLaneTcp(1000ms);
  std::unique_ptr<Agent> a_;  // declared after `target_`: destroyed before it
};

// A READ whose payload trickles in (a byte every 300 ms: 64 KiB would take five
// hours) ends with timeout within about twice the io_timeout of the reply's
// first byte, not when the target pleases: until it ends, the initiator's
// DeregisterMemory of the region waits for it.
TEST_F(TricklingTarget, ReadPayloadEndsWithinTheIoTimeout) {
  std::vector<uint8_t> buf(64 << 10);
  auto rid = a_->RegisterMemory(buf.data(), buf.size());
  ASSERT_TRUE(rid.ok());
  auto h = MakeSimple(*a_, "target", Op::kRead, buf.data(), reinterpret_cast<void*>(1ull << 40),
                      buf.size());
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  XferHandle x = h.value();
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_FALSE(a_->Post(&x).is_error());
  Status s = a_->Wait(x, o_.io_timeout * 3 + 4s);
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_FALSE(a_->Check(x).in_progress()) << "the trickled READ never ended: " << s.ToString();
  EXPECT_EQ(s.code(), Code::kTimeout) << s.ToString();
  EXPECT_LT(took, o_.io_timeout * 3 + 1s);
  EXPECT_EQ(a_->PeerError("target").code(), Code::kTimeout);
  auto deregistered = std::async(std::launch::async, [&] { return a_->DeregisterMemory(*rid); });
  EXPECT_EQ(deregistered.wait_for(2s), std::future_status::ready)
      << "DeregisterMemory waits for the trickled READ";
  target_.Release();  // unblocks a hung receiver otherwise
  EXPECT_TRUE(deregistered.get().ok());
  EXPECT_TRUE(a_->Release(&x).ok());
}

// A notification's acknowledgement trickled in (24 bytes, a byte every 300 ms:
// 7 s) ends SendNotification within about twice the io_timeout; it holds the
// channel's control connection, which transfers' notifications and the agent's
// destruction wait for.
TEST_F(TricklingTarget, NotificationAckEndsWithinTheIoTimeout) {
  const auto t0 = std::chrono::steady_clock::now();
  Status s = a_->SendNotification("target", "hello");
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(s.code(), Code::kTimeout) << s.ToString();
  EXPECT_LT(took, o_.io_timeout * 2 + 1s);
  target_.Release();
}

// A WRITE only reads its local memory: a reply that carries a payload (as a
// READ's would) is a protocol violation, and its bytes land nowhere — not in
// the WRITE's source, here registered read-only, which a hostile target could
// otherwise overwrite.
TEST(PayloadOnWrite, IsRefusedAndTheSourceStaysIntact) {
  ScriptedTarget target(PayloadForAnyFrame);
  auto a_or = Agent::Create(OneLaneTcp(2000ms));
  ASSERT_TRUE(a_or.ok());
  std::unique_ptr<Agent> a = std::move(a_or).value();
  GuardedBuffer src(64 << 10, 4096, 31);
  ASSERT_TRUE(
      a->RegisterMemory(src.body(), src.body_len(), MemoryKind::kHost, 0, Access::kReadOnly).ok());
  ASSERT_TRUE(a->LoadPeer(target.Blob()).ok());
  auto h = MakeSimple(*a, "target", Op::kWrite, src.body(), reinterpret_cast<void*>(1ull << 40),
                      src.body_len());
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  XferHandle x = h.value();
  Status s = PostAndWait(*a, &x);
  EXPECT_EQ(s.code(), Code::kBackend) << s.ToString();
  EXPECT_TRUE(src.BodyIntact()) << "the target's reply wrote into the WRITE's source";
  EXPECT_TRUE(src.GuardsIntact());
  EXPECT_EQ(a->PeerError("target").code(), Code::kBackend);
  target.Release();
  EXPECT_TRUE(a->Release(&x).ok());
}

// On tcp a READ's bytes come only in its reply: a "done" without them is a
// protocol violation, not a READ that succeeded with the buffer untouched
// (which would also have sent its notification).
TEST(BareReplyToRead, IsRefusedAndTheBufferStaysAsItWas) {
  ScriptedTarget target(BareReplyToAnyFrame);
  auto a_or = Agent::Create(OneLaneTcp(2000ms));
  ASSERT_TRUE(a_or.ok());
  std::unique_ptr<Agent> a = std::move(a_or).value();
  std::vector<uint8_t> buf(16 << 10);
  Fill(buf, 47);
  ASSERT_TRUE(a->RegisterMemory(buf.data(), buf.size()).ok());
  ASSERT_TRUE(a->LoadPeer(target.Blob()).ok());
  auto h = MakeSimple(*a, "target", Op::kRead, buf.data(), reinterpret_cast<void*>(1ull << 40),
                      buf.size(), "read done");
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  XferHandle x = h.value();
  Status s = PostAndWait(*a, &x);
  EXPECT_EQ(s.code(), Code::kBackend) << s.ToString();
  EXPECT_NE(s.message().find("without its payload"), std::string::npos) << s.ToString();
  EXPECT_EQ(FirstMismatch(buf.data(), buf.size(), 47), -1);
  EXPECT_EQ(a->PeerError("target").code(), Code::kBackend);
  target.Release();
  EXPECT_TRUE(a->Release(&x).ok());
}

// A notification's acknowledgement is a bare header: one that announces bytes
// after it latches a protocol error, rather than leaving them on the control
// connection to be read as the next notification's acknowledgement.
TEST(NotificationAckWithPayload, IsRefused) {
  ScriptedTarget target(ReplyWithEightBytes);
  auto a_or = Agent::Create(OneLaneTcp(2000ms));
  ASSERT_TRUE(a_or.ok());
  std::unique_ptr<Agent> a = std::move(a_or).value();
  ASSERT_TRUE(a->LoadPeer(target.Blob()).ok());
  Status s = a->SendNotification("target", "hello");
  EXPECT_EQ(s.code(), Code::kBackend) << s.ToString();
  EXPECT_NE(s.message().find("acknowledgement"), std::string::npos) << s.ToString();
  EXPECT_EQ(a->PeerError("target").code(), Code::kBackend);
  target.Release();
}

// A "target" that accepts connections and never says a word (no challenge):
// a connect to it stalls in its handshake until connect_timeout.
class SilentListener {
 public:
  uint16_t port() const { return listener_.port(); }
  // Waits up to 10 s until a connection came; whether one did.
  bool Dialed() {
    for (int i = 0; i < 2000; ++i) {
      {
        std::lock_guard lock(mu_);
        if (!held_.empty()) return true;
      }
      std::this_thread::sleep_for(5ms);
    }
    return false;
  }
  // Stops accepting and closes what it holds: a dial still in its handshake
  // fails at once (the tests need not wait out their long connect_timeout).
  void Stop() {
    listener_.Stop();
    std::lock_guard lock(mu_);
    held_.clear();
  }

 private:
  std::mutex mu_;
  std::vector<core::Fd> held_;  // GUARDED_BY(mu_)
  LoopbackListener listener_{[this](core::Fd c) {
    std::lock_guard lock(mu_);
    held_.push_back(std::move(c));
  }};
};

// A stalled connect would hold the calls these tests time for connect_timeout:
// long enough that the bounds below (2.5 s, for a busy host) still tell.
constexpr auto kSilentConnectTimeout = 15000ms;

// Where a silent target's blob says it holds 1 MiB: nothing moves there.
constexpr uint64_t kBase = 1ull << 40;

// A blob for `silent` (named "silent") with one fake region at kBase.
std::string BlobWithFakeRegion(const SilentListener& silent) {
  return FakeTargetId().Blob("silent", silent.port(),
                             {{0x54, kBase, 1 << 20, 1, MemoryKind::kHost, 0}});
}

// A target whose handshake stalls (it accepts and never sends its challenge)
// holds up only calls naming it: reloading its blob while a connect to it
// waits does not hold up calls naming another peer (LoadPeer used to wait for
// the stalled connect's lock while holding every peer's table).
TEST(SilentTarget, ItsStalledConnectHoldsUpNoOtherPeer) {
  SilentListener silent;
  const FakeTargetId id;
  const std::string blob = id.Blob("silent", silent.port());
  AgentOptions o = OptionsFor("a", "tcp");
  o.connect_timeout = kSilentConnectTimeout;
  auto a = Agent::Create(o).value();
  auto g = Agent::Create(OptionsFor("g", "tcp")).value();
  Connect(*a, *g);
  ASSERT_EQ(a->PeerTransport("g").value(), "tcp");
  ASSERT_EQ(a->LoadPeer(blob).value(), "silent");
  auto connecting = std::async(std::launch::async, [&] { return a->PeerTransport("silent"); });
  ASSERT_TRUE(silent.Dialed()) << "the connect never reached the silent target";
  std::this_thread::sleep_for(300ms);  // in its handshake, holding the peer's refresh_mu
  auto reloading = std::async(std::launch::async, [&] { return a->LoadPeer(blob); });
  std::this_thread::sleep_for(300ms);  // waiting for that lock
  const auto t0 = std::chrono::steady_clock::now();
  const Result<std::string> other = a->PeerTransport("g");
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_TRUE(other.ok()) << other.status().ToString();
  EXPECT_LT(took, 2500ms) << "a call naming another peer waited for the stalled connect";
  EXPECT_EQ(connecting.wait_for(0ms), std::future_status::timeout)
      << "the connect ended before the call was timed: the test proved nothing";
  silent.Stop();
  EXPECT_FALSE(connecting.get().ok());
  EXPECT_TRUE(reloading.get().ok());
}

// The stalled dial does not hold the peer's own lock either: calls naming the
// silent peer that need no connection (its latched error, preparing a list of
// its memory) answer while the dial waits (they used to wait out its
// connect_timeout).
TEST(SilentTarget, ItsStalledConnectHoldsUpNoCallThatNeedsNoConnection) {
  SilentListener silent;
  const std::string blob = BlobWithFakeRegion(silent);
  AgentOptions o = OptionsFor("a", "tcp");
  o.connect_timeout = kSilentConnectTimeout;
  auto a = Agent::Create(o).value();
  ASSERT_EQ(a->LoadPeer(blob).value(), "silent");
  auto connecting = std::async(std::launch::async, [&] { return a->PeerTransport("silent"); });
  ASSERT_TRUE(silent.Dialed()) << "the connect never reached the silent target";
  DescList list;
  list.Add(kBase, 4096);
  const auto t0 = std::chrono::steady_clock::now();
  const Status error = a->PeerError("silent");
  auto prepared = a->PrepareRemote("silent", list);
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_TRUE(error.ok()) << error.ToString();
  EXPECT_TRUE(prepared.ok()) << prepared.status().ToString();
  EXPECT_LT(took, 2500ms) << "a call needing no connection waited for the stalled connect";
  EXPECT_EQ(connecting.wait_for(0ms), std::future_status::timeout)
      << "the connect ended before the calls were timed: the test proved nothing";
  silent.Stop();
  EXPECT_FALSE(connecting.get().ok());
  if (prepared.ok()) EXPECT_TRUE(a->ReleasePrepared(*prepared).ok());
}

// The finding: MakeTransfer took its slot before connecting, so with one slot, a
// transfer being made to a stalled target held it for the whole connect and a
// transfer to a healthy peer meanwhile was refused as "all slots are in use". No
// slot is held across a connect now; with none free, MakeTransfer still refuses at
// once.
TEST(SilentTarget, ItsStalledConnectHoldsNoTransferSlot) {
  SilentListener silent;
  const std::string blob = BlobWithFakeRegion(silent);
  std::vector<uint8_t> src(4096, 1), dst(4096, 0);
  AgentOptions o = OptionsFor("a", "tcp");
  o.connect_timeout = kSilentConnectTimeout;
  o.max_requests = 1;
  auto a = Agent::Create(o).value();
  auto g = Agent::Create(OptionsFor("g", "tcp")).value();
  ASSERT_TRUE(a->RegisterMemory(src.data(), src.size()).ok());
  ASSERT_TRUE(g->RegisterMemory(dst.data(), dst.size()).ok());
  Connect(*a, *g);
  ASSERT_EQ(a->PeerTransport("g").value(), "tcp");
  ASSERT_EQ(a->LoadPeer(blob).value(), "silent");
  DescList l, r;
  l.Add(src.data(), 4096);
  r.Add(kBase, 4096);
  auto lp = a->PrepareLocal(l);
  auto rp = a->PrepareRemote("silent", r);
  ASSERT_TRUE(lp.ok() && rp.ok());
  auto stalled = std::async(std::launch::async,
                            [&] { return a->MakeTransfer(Op::kWrite, *lp, {}, *rp, {}).status(); });
  ASSERT_TRUE(silent.Dialed()) << "the connect never reached the silent target";
  auto healthy = MakeSimple(*a, "g", Op::kWrite, src.data(), dst.data(), 4096);
  ASSERT_TRUE(healthy.ok()) << healthy.status().ToString();
  EXPECT_EQ(stalled.wait_for(0ms), std::future_status::timeout)
      << "the connect ended before the healthy transfer was made: the test proved nothing";
  EXPECT_TRUE(PostAndWait(*a, &*healthy).ok());
  EXPECT_EQ(FirstNot(dst.data(), 4096, 1), -1);
  // The one slot is the healthy transfer's: the stalled one is refused for it once
  // its connect ends (or at once, were the channel open).
  silent.Stop();
  EXPECT_FALSE(stalled.get().ok());
  EXPECT_TRUE(a->Release(&*healthy).ok());
}

// A "target" that answers every handshake, each only `delay` after it
// accepted the connection: each connection alone is made within
// connect_timeout, all of a channel's together are not.
class LateListener {
 public:
  explicit LateListener(std::chrono::milliseconds delay) : delay_(delay) {}
  uint16_t port() const { return listener_.port(); }
  const FakeTargetId& id() const { return id_; }
  // Connections accepted so far.
  int accepted() const { return accepted_.load(); }
  void Stop() { listener_.Stop(); }

 private:
  const std::chrono::milliseconds delay_;
  const FakeTargetId id_;
  std::atomic<int> accepted_{0};
  std::mutex mu_;
  std::vector<core::Fd> held_;  // GUARDED_BY(mu_)
  LoopbackListener listener_{[this](core::Fd c) {
    ++accepted_;
    std::this_thread::sleep_for(delay_);
    if (!AcceptAnyHello(c.get(), id_.agent_id, id_.secret)) return;
    std::lock_guard lock(mu_);
    held_.push_back(std::move(c));
  }};
};

// Each connection of a channel, its connect and its handshake together, gets one
// connect_timeout: a target that answers every handshake late but inside it (a
// long round trip) still opens all its lanes, and one that answers a handshake
// too late ends the open there. (The handshake's own deadline once began after
// the connect: up to 2 x connect_timeout per connection.) Margins of 1.3 s and
// more either way: the listener answers one connection at a time, on a busy host.
TEST(LateStreamTarget, EachConnectionOfAnOpenGetsOneConnectTimeout) {
  constexpr auto kConnectTimeout = 2000ms;
  {
    LateListener slow(700ms);
    AgentOptions o = OptionsFor("a", "tcp");
    o.connect_timeout = kConnectTimeout;
    o.lanes_per_peer = 4;  // 5 x 700 ms: more than one connect_timeout in all
    auto a = Agent::Create(o).value();
    ASSERT_EQ(a->LoadPeer(slow.id().Blob("slow", slow.port())).value(), "slow");
    const Result<std::string> opened = a->PeerTransport("slow");
    EXPECT_TRUE(opened.ok()) << opened.status().ToString();
    EXPECT_EQ(slow.accepted(), 5);
    slow.Stop();
  }
  LateListener late(4500ms);
  AgentOptions o = OptionsFor("b", "tcp");
  o.connect_timeout = kConnectTimeout;
  o.lanes_per_peer = 4;
  auto b = Agent::Create(o).value();
  ASSERT_EQ(b->LoadPeer(late.id().Blob("late", late.port())).value(), "late");
  const auto t0 = std::chrono::steady_clock::now();
  const Result<std::string> opened = b->PeerTransport("late");
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(opened.status().code(), Code::kRemoteDisconnect) << opened.status().ToString();
  EXPECT_EQ(late.accepted(), 1) << "the open went past a control connection that never answered";
  EXPECT_LT(took, 2 * kConnectTimeout)
      << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms";
  late.Stop();
}

}  // namespace
}  // namespace kvlane::test
