// Hostile tcp targets, seen from the initiator: a target the initiator chose to
// talk to (it holds its own blob, so it passes the handshake) answers in ways a
// kvlane target never would. None of them may make the initiator write memory a
// request does not write, nor hold a request (and the DeregisterMemory that
// waits for it) past its io_timeout bounds.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <atomic>
#include <functional>
#include <future>
#include <list>
#include <mutex>
#include <thread>

#include "loopback_listener.h"
#include "raw_peer.h"
#include "test_util.h"

namespace kvlane::test {
namespace {

using namespace std::chrono_literals;

// A tcp "peer" that accepts every Hello, then runs `answer` on each connection,
// on a thread of its own, until the connection ends or Release.
class ScriptedTarget {
 public:
  // answer(fd, stop): serves the connection; returns once it is done or `stop` is set.
  using Answer = std::function<void(int fd, const std::atomic<bool>& stop)>;
  explicit ScriptedTarget(Answer answer) : answer_(std::move(answer)) {}
  ~ScriptedTarget() { Release(); }

  // Metadata naming this endpoint "target", with one large fake region at 2^40.
  std::string Blob() const {
    return id_.Blob("target", listener_.port(),
                    {{0x54, 1ull << 40, 1ull << 30, 1, MemoryKind::kHost, 0}});
  }
  // Stops every answer, closes every connection (a blocked initiator then sees
  // EOF) and joins. Idempotent.
  void Release() {
    listener_.Stop();
    stop_ = true;
    std::lock_guard lock(mu_);
    for (core::Fd& c : conns_) shutdown(c.get(), SHUT_RDWR);
    for (std::thread& t : threads_) t.join();
    threads_.clear();
  }

 private:
  void Serve(core::Fd c) {
    if (!AcceptAnyHello(c.get(), id_.agent_id, id_.secret)) return;
    std::lock_guard lock(mu_);
    threads_.emplace_back([this, fd = c.get()] { answer_(fd, stop_); });
    conns_.push_back(std::move(c));
  }

  const Answer answer_;
  const FakeTargetId id_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::list<core::Fd> conns_;       // GUARDED_BY(mu_)
  std::list<std::thread> threads_;  // GUARDED_BY(mu_)
  LoopbackListener listener_{[this](core::Fd c) { Serve(std::move(c)); }};
};

// Reads one frame: header, segments and (WRITE, notification) its payload.
bool ReadFrame(int fd, core::FrameHeader* h) {
  if (!core::RecvAll(fd, h, sizeof(*h)).ok()) return false;
  std::vector<core::WireSeg> segs(h->nseg);
  if (!core::RecvAll(fd, segs.data(), segs.size() * sizeof(core::WireSeg)).ok()) return false;
  const bool read = h->type == static_cast<uint8_t>(core::FrameType::kRead);
  return read || core::Discard(fd, h->bytes).ok();
}

// Answers the connection's first frame a byte every `pace` (well inside the
// initiator's io_timeout: never silent that long): a READ's reply header at
// once and then its payload, any other reply from its first byte.
ScriptedTarget::Answer Trickle(std::chrono::milliseconds pace) {
  return [pace](int fd, const std::atomic<bool>& stop) {
    core::FrameHeader h{};
    if (!ReadFrame(fd, &h)) return;
    const bool read = h.type == static_cast<uint8_t>(core::FrameType::kRead);
    const core::ReplyHeader r{h.ticket, 0, 0, read ? h.bytes : 0};
    std::string out(reinterpret_cast<const char*>(&r), sizeof(r));
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
  const core::ReplyHeader r{h.ticket, 0, 0, h.bytes};
  std::string out(reinterpret_cast<const char*>(&r), sizeof(r));
  out.append(h.bytes, '\x66');
  (void)core::SendAll(fd, out.data(), out.size());
}

AgentOptions OneLaneTcp(std::chrono::milliseconds io_timeout) {
  AgentOptions o = OptionsFor("a", "tcp");
  o.io_timeout = io_timeout;
  o.lanes_per_peer = 1;
  return o;
}

// A READ whose payload trickles in (a byte every 300 ms: 64 KiB would take five
// hours) ends with timeout within about twice the io_timeout of the reply's
// first byte, not when the target pleases: until it ends, the initiator's
// DeregisterMemory of the region waits for it.
TEST(TricklingTarget, ReadPayloadEndsWithinTheIoTimeout) {
  ScriptedTarget target(Trickle(300ms));
  const AgentOptions o = OneLaneTcp(1000ms);
  auto a_or = Agent::Create(o);
  ASSERT_TRUE(a_or.ok());
  std::unique_ptr<Agent> a = std::move(a_or).value();
  std::vector<uint8_t> buf(64 << 10);
  auto rid = a->RegisterMemory(buf.data(), buf.size());
  ASSERT_TRUE(rid.ok());
  ASSERT_TRUE(a->LoadPeer(target.Blob()).ok());
  auto h = MakeSimple(*a, "target", Op::kRead, buf.data(), reinterpret_cast<void*>(1ull << 40),
                      buf.size());
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  XferHandle x = h.value();
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_FALSE(a->Post(&x).is_error());
  Status s = a->Wait(x, o.io_timeout * 3 + 4s);
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_FALSE(a->Check(x).in_progress()) << "the trickled READ never ended: " << s.ToString();
  EXPECT_EQ(s.code(), Code::kTimeout) << s.ToString();
  EXPECT_LT(took, o.io_timeout * 3 + 1s);
  EXPECT_EQ(a->PeerError("target").code(), Code::kTimeout);
  auto deregistered = std::async(std::launch::async, [&] { return a->DeregisterMemory(*rid); });
  EXPECT_EQ(deregistered.wait_for(2s), std::future_status::ready)
      << "DeregisterMemory waits for the trickled READ";
  target.Release();  // unblocks a hung receiver otherwise
  EXPECT_TRUE(deregistered.get().ok());
  EXPECT_TRUE(a->Release(&x).ok());
}

// A notification's acknowledgement trickled in (24 bytes, a byte every 300 ms:
// 7 s) ends SendNotification within about twice the io_timeout; it holds the
// channel's control connection, which transfers' notifications and the agent's
// destruction wait for.
TEST(TricklingTarget, NotificationAckEndsWithinTheIoTimeout) {
  ScriptedTarget target(Trickle(300ms));
  const AgentOptions o = OneLaneTcp(1000ms);
  auto a_or = Agent::Create(o);
  ASSERT_TRUE(a_or.ok());
  std::unique_ptr<Agent> a = std::move(a_or).value();
  ASSERT_TRUE(a->LoadPeer(target.Blob()).ok());
  const auto t0 = std::chrono::steady_clock::now();
  Status s = a->SendNotification("target", "hello");
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(s.code(), Code::kTimeout) << s.ToString();
  EXPECT_LT(took, o.io_timeout * 2 + 1s);
  target.Release();
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

}  // namespace
}  // namespace kvlane::test
