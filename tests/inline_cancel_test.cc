// Cancel of a request whose inline send (Kick) found no room in the socket:
// the request is only queued (no lane started it), so Cancel must succeed
// (DESIGN: "cancel of a queued/finished one succeeds").
//
// Fault injection by symbol interposition (this executable only):
//  - sendmsg with MSG_DONTWAIT from the test thread (Kick's SendIovIfRoom)
//    reports EAGAIN once armed, as a full socket would;
//  - pthread_mutex_trylock from any other thread (the lane's sender, before
//    it takes the issue mutex) waits while `hold` is set, so the sender
//    cannot take the frame before the test's Cancel runs.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include "test_util.h"

namespace {
std::atomic<bool> g_armed{false};
std::atomic<bool> g_hold{false};
std::atomic<int> g_held{0};
std::atomic<long> g_test_tid{0};
std::atomic<int> g_refused{0};  // EAGAINs handed out
long Tid() { return syscall(SYS_gettid); }
}  // namespace

std::atomic<int> g_cut{0};  // 2: the next inline send moves 10 bytes, 1: then fails ECONNRESET

extern "C" ssize_t sendmsg(int fd, const struct msghdr* msg, int flags) {
  if ((flags & MSG_DONTWAIT) && Tid() == g_test_tid.load() && g_cut.load() > 0) {
    if (g_cut.fetch_sub(1) == 1) {
      errno = ECONNRESET;
      return -1;
    }
    msghdr part = *msg;
    iovec first = msg->msg_iov[0];
    first.iov_len = std::min<size_t>(first.iov_len, 10);
    part.msg_iov = &first;
    part.msg_iovlen = 1;
    return syscall(SYS_sendmsg, fd, &part, flags);
  }
  if ((flags & MSG_DONTWAIT) && Tid() == g_test_tid.load() && g_armed.exchange(false)) {
    g_refused.fetch_add(1);
    errno = EAGAIN;
    return -1;
  }
  return syscall(SYS_sendmsg, fd, msg, flags);
}

// std::mutex::try_lock (the issue mutex: the lane's sender, or a Kick).
extern "C" int pthread_mutex_trylock(pthread_mutex_t* m) {
  using Fn = int (*)(pthread_mutex_t*);
  static Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "pthread_mutex_trylock"));
  if (g_hold.load() && Tid() != g_test_tid.load()) {
    g_held.fetch_add(1);
    while (g_hold.load()) usleep(100);
    g_held.fetch_sub(1);
  }
  return real(m);
}

namespace kvlane::test {
namespace {

using namespace std::chrono_literals;

class InlineCancelTest : public ::testing::TestWithParam<std::string> {};

TEST_P(InlineCancelTest, CancelAfterAKickFoundNoRoomSucceeds) {
  Buffers bufs;
  AgentOptions o;
  o.lanes_per_peer = 1;
  o.spin = 0us;  // the sender sleeps: the post's Kick takes the issue mutex first
  Pair p = MakePair(GetParam(), o);
  ASSERT_TRUE(p.a && p.b);
  constexpr uint64_t n = 4096;
  auto& src = bufs.Make(n);
  auto& dst = bufs.Make(n, 0xEE);
  Fill(src, 5);
  ASSERT_TRUE(p.a->RegisterMemory(src.data(), n).ok());
  ASSERT_TRUE(p.b->RegisterMemory(dst.data(), n).ok());
  Connect(*p.a, *p.b);
  // The sender may win the issue mutex before the post's Kick (it was woken
  // by the push): then nothing was injected, and the round is run again.
  bool injected = false;
  for (int attempt = 0; attempt < 20 && !injected; ++attempt) {
    std::fill(dst.begin(), dst.end(), 0xEE);
    auto h = MakeSimple(*p.a, "b", Op::kWrite, src.data(), dst.data(), n);
    ASSERT_TRUE(h.ok());
    std::this_thread::sleep_for(20ms);  // lane threads asleep
    g_refused.store(0);
    g_test_tid.store(Tid());
    g_hold.store(true);
    g_armed.store(true);
    ASSERT_EQ(p.a->Post(&h.value()).code(), Code::kInProgress);
    injected = g_refused.load() == 1;
    // The frame is queued and unsent; the sender cannot take it before this.
    Status canceled = injected ? p.a->Cancel(h.value()) : Status::Ok();
    g_hold.store(false);
    g_armed.store(false);
    Status end = p.a->Wait(h.value(), 10s);
    if (injected) {
      EXPECT_TRUE(canceled.ok()) << "a queued request that no lane started must cancel: "
                                 << canceled.ToString();
      if (canceled.ok()) {
        EXPECT_EQ(end.code(), Code::kCanceled) << end.ToString();
        EXPECT_EQ(FirstNot(dst.data(), n, 0xEE), -1) << "a canceled request moved bytes";
      }
    }
    EXPECT_TRUE(p.a->Release(&h.value()).ok());
  }
  ASSERT_TRUE(injected) << "the sender took the frame first every time";
  EXPECT_TRUE(p.a->PeerError("b").ok()) << p.a->PeerError("b").ToString();
}

// The inline send fails half way through a frame: the channel latches, the
// request ends with the error (drained by the lane), nothing hangs, and the
// next post is refused with the latched status. The sender may win the issue
// mutex before the post's Kick (then nothing was cut, the post went whole):
// the round is run again, and a test that never cut an inline send fails.
TEST_P(InlineCancelTest, InlineSendFailingMidFrameFailsTheRequest) {
  Buffers bufs;
  AgentOptions o;
  o.lanes_per_peer = 1;
  o.spin = 0us;  // the sender sleeps: the post's Kick takes the issue mutex first
  o.io_timeout = std::chrono::milliseconds(2000);
  Pair p = MakePair(GetParam(), o);
  ASSERT_TRUE(p.a && p.b);
  constexpr uint64_t n = 4096;
  auto& src = bufs.Make(n);
  auto& dst = bufs.Make(n, 0xEE);
  ASSERT_TRUE(p.a->RegisterMemory(src.data(), n).ok());
  ASSERT_TRUE(p.b->RegisterMemory(dst.data(), n).ok());
  Connect(*p.a, *p.b);
  auto h = MakeSimple(*p.a, "b", Op::kWrite, src.data(), dst.data(), n);
  ASSERT_TRUE(h.ok());
  bool cut = false;
  Status end;
  for (int attempt = 0; attempt < 20 && !cut; ++attempt) {
    std::this_thread::sleep_for(20ms);  // lane threads asleep
    g_test_tid.store(Tid());
    g_cut.store(2);
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_EQ(p.a->Post(&h.value()).code(), Code::kInProgress);
    cut = g_cut.load() == 0;
    g_cut.store(0);
    end = p.a->Wait(h.value(), 10s);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
    if (!cut) ASSERT_TRUE(end.ok()) << "a post sent whole by the sender: " << end.ToString();
  }
  ASSERT_TRUE(cut) << "the sender sent the frame every time (no inline send was cut)";
  EXPECT_TRUE(end.is_error()) << end.ToString();
  EXPECT_EQ(end.code(), Code::kRemoteDisconnect) << end.ToString();
  EXPECT_FALSE(p.a->PeerError("b").ok());
  EXPECT_TRUE(p.a->Post(&h.value()).is_error());
  EXPECT_TRUE(p.a->Release(&h.value()).ok());
}

// A post of more chunks than the lane's ring holds, on one lane (not
// striped), to a sleeping lane thread: the post waits for the ring, so the
// lane's thread must have been woken for the chunks already queued.
TEST_P(InlineCancelTest, OneLanePostLargerThanTheRing) {
  Buffers bufs;
  AgentOptions o;
  o.lanes_per_peer = 1;
  o.lane_ring_slots = 16;
  o.chunk_bytes = 4096;
  o.spin = 0us;
  // A lane never woken leaves the ring full: the post fails at this timeout (or,
  // queued whole, the wait at PostAndWait's 10 s), both above the bound below.
  o.post_timeout = std::chrono::milliseconds(10000);
  Pair p = MakePair(GetParam(), o);
  ASSERT_TRUE(p.a && p.b);
  constexpr uint64_t n = 1 << 20;  // 256 chunks
  auto& src = bufs.Make(n);
  auto& dst = bufs.Make(n);
  Fill(src, 9);
  ASSERT_TRUE(p.a->RegisterMemory(src.data(), n).ok());
  ASSERT_TRUE(p.b->RegisterMemory(dst.data(), n).ok());
  Connect(*p.a, *p.b);
  XferOptions xo;
  xo.stripe = false;
  auto h = MakeSimple(*p.a, "b", Op::kWrite, src.data(), dst.data(), n, {}, xo);
  ASSERT_TRUE(h.ok());
  std::this_thread::sleep_for(20ms);  // lane threads asleep
  const auto t0 = std::chrono::steady_clock::now();
  Status s = PostAndWait(*p.a, &h.value());
  EXPECT_TRUE(s.ok()) << s.ToString();
  // About 30 ms unloaded; 5 s leaves room for a loaded CI machine (a stall of
  // the lane or the test thread) and stays below the timeouts a lost wake-up hits.
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  EXPECT_EQ(FirstMismatch(dst.data(), n, 9), -1);
  EXPECT_TRUE(p.a->Release(&h.value()).ok());
}

INSTANTIATE_TEST_SUITE_P(Streams, InlineCancelTest, ::testing::Values("shm", "tcp"));

}  // namespace
}  // namespace kvlane::test
