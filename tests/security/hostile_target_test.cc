// Hostile tcp targets, seen from the initiator: a target the initiator chose to
// talk to (it holds its own blob, so it passes the handshake) answers in ways a
// kvlane target never would. None of them may make the initiator write memory a
// request does not write, nor hold a request (and the DeregisterMemory that
// waits for it) past its io_timeout bounds.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <atomic>
#include <functional>
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
