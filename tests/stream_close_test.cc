// A stream channel (shm, tcp) closed under its lanes, and its sender waiting
// for a posting thread's inline send (StreamChannel::Kick).
//
// Close is what an agent's teardown runs on each channel; the tests call it
// through AgentImpl::PeerChannel, so the agent and its handles stay usable.
// Requests a local Close ends must end kCanceled, never kRemoteDisconnect
// (which says the peer failed), whichever lane call noticed the shutdown.
//
// Fault injection by symbol interposition (this executable only):
//  - sendmsg with MSG_DONTWAIT from the test thread (Kick's inline send) runs
//    `g_inline_hook` first, once armed: the Kick holds the lane's issue mutex;
//  - recvmsg on descriptor `g_hold_fd` (or on any descriptor, from any thread
//    but the test's, while `g_hold_all`) waits until released, so that the
//    lane's receiver cannot notice a Close before the call under test does;
//  - a blocking sendmsg from another thread counts in `g_blocking_sends` while
//    it runs, so that a test can see the lane's sender blocked in one.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <thread>

#include "core/agent_impl.h"
#include "test_util.h"

namespace {
std::atomic<long> g_test_tid{0};
std::atomic<bool> g_armed{false};
std::function<void(int fd)> g_inline_hook;  // set before g_armed, run on the test thread
std::atomic<int> g_hold_fd{-1};
std::atomic<bool> g_hold_all{false};
std::atomic<int> g_blocking_sends{0};
long Tid() { return syscall(SYS_gettid); }
}  // namespace

extern "C" ssize_t sendmsg(int fd, const struct msghdr* msg, int flags) {
  if ((flags & MSG_DONTWAIT) && Tid() == g_test_tid.load() && g_armed.exchange(false))
    g_inline_hook(fd);
  const bool counted = !(flags & MSG_DONTWAIT) && Tid() != g_test_tid.load();
  if (counted) g_blocking_sends.fetch_add(1);
  const ssize_t rc = syscall(SYS_sendmsg, fd, msg, flags);
  if (counted) g_blocking_sends.fetch_sub(1);
  return rc;
}

extern "C" ssize_t recvmsg(int fd, struct msghdr* msg, int flags) {
  while (g_hold_fd.load() == fd || (g_hold_all.load() && Tid() != g_test_tid.load())) usleep(100);
  return syscall(SYS_recvmsg, fd, msg, flags);
}

namespace kvlane::test {
namespace {

using namespace std::chrono_literals;

// Until `fd` reports a hang-up (both directions shut down), at most 5 s.
bool AwaitHangUp(int fd) {
  for (int i = 0; i < 5000; ++i) {
    pollfd p{fd, 0, 0};
    if (poll(&p, 1, 1) > 0 && (p.revents & POLLHUP)) return true;
  }
  return false;
}

// Until some thread has been inside a blocking sendmsg for 100 ms without a
// break (a send that is not blocked returns in microseconds), at most 10 s.
bool AwaitBlockedSend() {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  auto since = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() < deadline) {
    const auto now = std::chrono::steady_clock::now();
    if (g_blocking_sends.load() == 0) since = now;
    if (now - since >= std::chrono::milliseconds(100)) return true;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return false;
}

class StreamCloseTest : public ::testing::TestWithParam<std::string> {
 protected:
  // One lane, so that every post and the Close meet on it.
  void Start(uint64_t bytes) {
    AgentOptions o;
    o.lanes_per_peer = 1;
    p_ = MakePair(GetParam(), o);
    ASSERT_TRUE(p_.a && p_.b);
    src_ = &bufs_.Make(bytes);
    dst_ = &bufs_.Make(bytes);
    ASSERT_TRUE(p_.a->RegisterMemory(src_->data(), bytes).ok());
    ASSERT_TRUE(p_.b->RegisterMemory(dst_->data(), bytes).ok());
    Connect(*p_.a, *p_.b);
    auto ch = p_.a->impl()->PeerChannel("b");
    ASSERT_TRUE(ch.ok()) << ch.status().ToString();
    channel_ = ch.value();
    g_test_tid.store(Tid());
  }
  void TearDown() override {
    g_armed.store(false);
    g_hold_fd.store(-1);
    g_hold_all.store(false);
    g_test_tid.store(0);
  }
  Result<XferHandle> Make(uint64_t n) {
    return MakeSimple(*p_.a, "b", Op::kWrite, src_->data(), dst_->data(), n);
  }
  // Posts `h` with g_inline_hook armed, once the lane threads have had 20 ms to
  // fall asleep: `kicked` says whether the post's own Kick sent it (the hook ran).
  // The sender may still be awake (a loaded machine runs the lane threads late)
  // and take the frame first: the caller then lets the post end and tries again.
  struct ArmedPost {
    Code code;
    bool kicked;
  };
  ArmedPost PostArmed(XferHandle* h) {
    std::this_thread::sleep_for(20ms);
    g_armed.store(true);
    const Code code = p_.a->Post(h).code();
    return {code, !g_armed.exchange(false)};
  }

  Buffers bufs_;
  Pair p_;
  std::vector<uint8_t>* src_ = nullptr;
  std::vector<uint8_t>* dst_ = nullptr;
  core::Channel* channel_ = nullptr;
};

// A post's inline send (Kick) passed the closing check, then Close shut the
// lane down before the send went out: the send fails with EPIPE, and that is
// the Close's doing. The request and the channel end kCanceled.
TEST_P(StreamCloseTest, KickFailingBecauseOfCloseEndsCanceled) {
  Start(4096);
  auto h = Make(4096);
  ASSERT_TRUE(h.ok());
  std::thread closer;
  bool hung_up = false;
  g_inline_hook = [&](int fd) {
    g_hold_fd.store(fd);  // the receiver must not see the shutdown first
    closer = std::thread([this] { channel_->Close(); });
    hung_up = AwaitHangUp(fd);
  };
  // A round the sender took closed nothing: the request ends Ok.
  bool kicked = false;
  for (int attempt = 0; attempt < 20 && !kicked; ++attempt) {
    const ArmedPost post = PostArmed(&h.value());
    EXPECT_EQ(post.code, Code::kInProgress);
    kicked = post.kicked;
    g_hold_fd.store(-1);
    if (closer.joinable()) closer.join();
    if (!kicked) {
      const Status sent = p_.a->Wait(h.value(), 10s);
      ASSERT_TRUE(sent.ok()) << "a post the sender sent: " << sent.ToString();
    }
  }
  ASSERT_TRUE(kicked) << "the post did not send inline (the sender took it every time)";
  ASSERT_TRUE(hung_up) << "Close did not shut the lane down";
  Status end = p_.a->Wait(h.value(), 10s);
  EXPECT_EQ(end.code(), Code::kCanceled) << end.ToString();
  EXPECT_EQ(p_.a->PeerError("b").code(), Code::kCanceled) << p_.a->PeerError("b").ToString();
  EXPECT_EQ(p_.a->Post(&h.value()).code(), Code::kCanceled);
  EXPECT_TRUE(p_.a->Release(&h.value()).ok());
}

// The lane's sender is blocked in the send of a large frame (the target
// stalls and reads nothing) when Close shuts the lane down: its EPIPE is the
// Close's doing too. tcp only: an shm frame carries no payload.
class StreamCloseTcpTest : public StreamCloseTest {};  // instantiated for tcp alone, below

TEST_P(StreamCloseTcpTest, SenderFailingBecauseOfCloseEndsCanceled) {
  ASSERT_EQ(GetParam(), "tcp");
  constexpr uint64_t n = 64u << 20;  // more than the sockets buffer
  Start(n);
  auto h = Make(n);
  ASSERT_TRUE(h.ok());
  RemoteStall stall(*p_.b);
  ASSERT_EQ(p_.a->Post(&h.value()).code(), Code::kInProgress);
  ASSERT_TRUE(AwaitBlockedSend()) << "the sender did not block on the full socket";
  g_hold_all.store(true);  // every receive waits: the sender fails first
  std::thread closer([this] { channel_->Close(); });
  std::this_thread::sleep_for(300ms);
  g_hold_all.store(false);
  closer.join();
  stall.Release();
  Status end = p_.a->Wait(h.value(), 10s);
  EXPECT_EQ(end.code(), Code::kCanceled) << end.ToString();
  EXPECT_EQ(p_.a->PeerError("b").code(), Code::kCanceled) << p_.a->PeerError("b").ToString();
  EXPECT_TRUE(p_.a->Release(&h.value()).ok());
}

// Small posts from one thread while another closes the channel: each ends Ok
// or Canceled (a post after the close is refused with kCanceled), none hangs.
TEST_P(StreamCloseTest, PostsRacingCloseEndCanceledOrOk) {
  for (int round = 0; round < 20; ++round) {
    Start(4096);
    constexpr int kHandles = 8;
    std::vector<XferHandle> hs;
    for (int i = 0; i < kHandles; ++i) hs.push_back(Make(512).value());
    std::atomic<bool> stop{false};
    std::thread poster([&] {
      for (uint64_t k = 0; !stop.load(); ++k) {
        XferHandle& h = hs[k % kHandles];
        Status s = p_.a->Post(&h);
        if (s.in_progress()) s = p_.a->Wait(h, 10s);
        EXPECT_TRUE(s.ok() || s.code() == Code::kCanceled) << s.ToString();
        if (!s.ok()) break;
      }
    });
    std::this_thread::sleep_for(std::chrono::microseconds(200 * round));
    channel_->Close();
    stop.store(true);
    poster.join();
    // Latched only when a lane call failed on the shutdown (else nothing failed).
    const Status latched = p_.a->PeerError("b");
    EXPECT_TRUE(latched.ok() || latched.code() == Code::kCanceled) << latched.ToString();
    for (auto& h : hs) EXPECT_TRUE(p_.a->Release(&h).ok());
    if (HasFailure()) break;
  }
}

// A Kick holds the lane's issue mutex through a long inline send while the
// sender has work: the sender waits for the mutex without burning a CPU.
TEST_P(StreamCloseTest, SenderWaitsForAKickWithoutSpinning) {
  Start(4096);
  auto first = Make(4096), second = Make(4096);
  ASSERT_TRUE(first.ok() && second.ok());
  std::chrono::nanoseconds cpu{0};
  g_inline_hook = [&](int) {
    // The second post finds the mutex taken and rings the sender, which then
    // waits for it behind this send.
    std::thread([&] { EXPECT_EQ(p_.a->Post(&second.value()).code(), Code::kInProgress); }).join();
    const auto cpu0 = ProcessCpuTime();
    std::this_thread::sleep_for(300ms);
    cpu = ProcessCpuTime() - cpu0;
  };
  // A round the sender took ran no hook (no second post).
  bool kicked = false;
  for (int attempt = 0; attempt < 20 && !kicked; ++attempt) {
    const ArmedPost post = PostArmed(&first.value());
    ASSERT_EQ(post.code, Code::kInProgress);
    kicked = post.kicked;
    EXPECT_TRUE(p_.a->Wait(first.value(), 10s).ok());
  }
  ASSERT_TRUE(kicked) << "the post did not send inline (the sender took it every time)";
  EXPECT_TRUE(p_.a->Wait(second.value(), 10s).ok());
  EXPECT_LT(cpu, 60ms) << "CPU time spent while a Kick held the issue mutex for 300 ms";
  EXPECT_TRUE(p_.a->Release(&first.value()).ok());
  EXPECT_TRUE(p_.a->Release(&second.value()).ok());
}

INSTANTIATE_TEST_SUITE_P(Streams, StreamCloseTest, ::testing::Values("shm", "tcp"));
INSTANTIATE_TEST_SUITE_P(Streams, StreamCloseTcpTest, ::testing::Values("tcp"));

}  // namespace
}  // namespace kvlane::test
