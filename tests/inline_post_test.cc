// Posts sent by the posting thread itself (AgentOptions::post_inline_bytes) on
// the stream transports: the socket call that never waits before its first
// byte, and posting threads racing the lane's sender thread on one lane.
#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "core/agent_impl.h"
#include "test_util.h"
#include "transport/stream/socket.h"
#include "transport/stream/stream_channel.h"

namespace kvlane::test {
namespace {

using namespace std::chrono_literals;

// Fills the send side of a blocking socket pair until it takes no more.
size_t FillUp(int fd) {
  std::vector<char> junk(1 << 16, 'x');
  size_t total = 0;
  for (;;) {
    ssize_t n = send(fd, junk.data(), junk.size(), MSG_DONTWAIT);
    if (n <= 0) return total;
    total += static_cast<size_t>(n);
  }
}

TEST(SendIovIfRoom, SendsNothingWhenTheSocketIsFull) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  core::Fd a(sv[0]), b(sv[1]);
  const size_t queued = FillUp(a.get());
  ASSERT_GT(queued, 0u);
  char msg[64] = "frame";
  iovec v{msg, sizeof(msg)};
  auto sent = core::SendIovIfRoom(a.get(), &v, 1, core::DeadlineIn(std::chrono::seconds(10)));
  ASSERT_TRUE(sent.ok()) << sent.status().ToString();
  EXPECT_FALSE(sent.value()) << "a full socket must leave the frame unsent";
  EXPECT_EQ(v.iov_len, sizeof(msg)) << "the iovec must be untouched";
  // Nothing of the frame is in the stream: the reader finds only the filler.
  std::string got(queued, '\0');
  ASSERT_TRUE(core::RecvAll(b.get(), got.data(), got.size()).ok());
  EXPECT_EQ(got.find_first_not_of('x'), std::string::npos);
  char extra = 0;
  EXPECT_EQ(recv(b.get(), &extra, 1, MSG_DONTWAIT), -1) << "frame bytes leaked into the stream";
  // With room again, every byte goes.
  v = {msg, sizeof(msg)};
  sent = core::SendIovIfRoom(a.get(), &v, 1, core::DeadlineIn(std::chrono::seconds(10)));
  ASSERT_TRUE(sent.ok() && sent.value());
  char back[sizeof(msg)] = {};
  ASSERT_TRUE(core::RecvAll(b.get(), back, sizeof(back)).ok());
  EXPECT_EQ(std::string(back), "frame");
}

// A frame larger than the room left: once its first bytes went, the rest
// follows as the reader drains the socket (never a frame cut in two).
TEST(SendIovIfRoom, FinishesAFrameItStarted) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  core::Fd a(sv[0]), b(sv[1]);
  const size_t big = 4u << 20;  // more than a unix socket buffers
  std::vector<uint8_t> frame(big);
  Fill(frame, 7);
  std::vector<uint8_t> got(big);
  std::thread reader([&] { ASSERT_TRUE(core::RecvAll(b.get(), got.data(), got.size()).ok()); });
  iovec v{frame.data(), frame.size()};
  auto sent = core::SendIovIfRoom(a.get(), &v, 1, core::DeadlineIn(std::chrono::seconds(10)));
  reader.join();
  ASSERT_TRUE(sent.ok() && sent.value()) << sent.status().ToString();
  EXPECT_EQ(FirstMismatch(got.data(), big, 7), -1);
}

// A reader that stops half way: a frame already started ends at the deadline
// with kTimeout (the posting thread never waits longer), not never.
TEST(SendIovIfRoom, AFrameStartedEndsByTheDeadline) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  core::Fd a(sv[0]), b(sv[1]);
  std::vector<uint8_t> frame(4u << 20);  // more than a unix socket buffers
  iovec v{frame.data(), frame.size()};
  const auto t0 = std::chrono::steady_clock::now();
  auto sent = core::SendIovIfRoom(a.get(), &v, 1, core::DeadlineIn(300ms));
  const auto took = std::chrono::steady_clock::now() - t0;
  ASSERT_FALSE(sent.ok()) << "the reader never drained the socket";
  EXPECT_EQ(sent.status().code(), Code::kTimeout) << sent.status().ToString();
  EXPECT_GE(took, 250ms);
  EXPECT_LT(took, 5s);
}

// A deadline less than a millisecond away is kept exactly: a frame started
// and stuck ends with kTimeout at the deadline, not before it (the time left
// must not be cut to whole milliseconds, which reads a remainder of 0.9 ms as
// none at all).
TEST(SendIovIfRoom, AFrameStartedEndsNotBeforeASubMillisecondDeadline) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  core::Fd a(sv[0]), b(sv[1]);
  std::vector<uint8_t> frame(4u << 20);  // more than a unix socket buffers; nobody reads
  iovec v{frame.data(), frame.size()};
  const core::Deadline by = std::chrono::steady_clock::now() + 900us;
  auto sent = core::SendIovIfRoom(a.get(), &v, 1, by);
  const auto end = std::chrono::steady_clock::now();
  ASSERT_FALSE(sent.ok()) << "the reader never drained the socket";
  EXPECT_EQ(sent.status().code(), Code::kTimeout) << sent.status().ToString();
  EXPECT_GE(end, by) << "ended "
                     << std::chrono::duration_cast<std::chrono::microseconds>(by - end).count()
                     << " us before its deadline";
  EXPECT_LT(end - by, 500ms);
}

// A started frame ends by the deadline even when signals keep interrupting
// the wait for room (a profiler's SIGPROF, a runtime's preemption signal):
// each EINTR must not restart a full poll timeout.
TEST(SendIovIfRoom, AFrameStartedEndsByTheDeadlineUnderSignals) {
  struct sigaction sa {};
  sa.sa_handler = [](int) {};
  sigemptyset(&sa.sa_mask);
  struct sigaction old {};
  ASSERT_EQ(sigaction(SIGUSR1, &sa, &old), 0);
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  core::Fd a(sv[0]), b(sv[1]);
  std::vector<uint8_t> frame(4u << 20);  // more than a unix socket buffers; nobody reads
  std::atomic<bool> done{false};
  std::atomic<pthread_t> sender_tid{};
  std::atomic<bool> ready{false};
  Result<bool> sent = false;
  std::chrono::steady_clock::duration took{};
  std::thread sender([&] {
    sender_tid.store(pthread_self());
    ready.store(true);
    iovec v{frame.data(), frame.size()};
    const auto t0 = std::chrono::steady_clock::now();
    sent = core::SendIovIfRoom(a.get(), &v, 1, core::DeadlineIn(300ms));
    took = std::chrono::steady_clock::now() - t0;
    done.store(true);
  });
  while (!ready.load()) std::this_thread::yield();
  // A signal every 5 ms, for at most 3 s (then the call may end on its own).
  const auto stop = std::chrono::steady_clock::now() + 3s;
  while (!done.load() && std::chrono::steady_clock::now() < stop) {
    pthread_kill(sender_tid.load(), SIGUSR1);
    std::this_thread::sleep_for(5ms);
  }
  sender.join();
  sigaction(SIGUSR1, &old, nullptr);
  ASSERT_FALSE(sent.ok());
  EXPECT_EQ(sent.status().code(), Code::kTimeout) << sent.status().ToString();
  EXPECT_LT(took, 2s) << "the deadline (300 ms) was overrun while signals arrived";
}

// Four posting threads share one lane: two post 4 KiB WRITEs and READs (sent
// inline whenever the lane is idle), one posts 256 KiB WRITEs (always the
// sender thread's), one alternates. Every byte of every round is checked, and
// tickets must stay in order (a reply out of order latches the channel).
class InlinePostTest : public ::testing::TestWithParam<std::tuple<std::string, uint64_t>> {
 protected:
  void SetUp() override {
    AgentOptions o;
    o.lanes_per_peer = 1;
    o.post_inline_bytes = std::get<1>(GetParam());
    pair_ = MakePair(std::get<0>(GetParam()), o);
    ASSERT_TRUE(pair_.a && pair_.b);
  }
  Buffers bufs_;
  Pair pair_;
};

TEST_P(InlinePostTest, PostersShareOneLaneWithItsSender) {
  Agent& a = *pair_.a;
  Agent& b = *pair_.b;
  constexpr int kThreads = 4;
  constexpr int kRounds = 150;
  const uint64_t sizes[kThreads] = {4096, 4096, 256 << 10, 0};  // 0: alternate
  std::vector<std::vector<uint8_t>*> here(kThreads), there(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    here[t] = &bufs_.Make(256 << 10);
    there[t] = &bufs_.Make(256 << 10);
    ASSERT_TRUE(a.RegisterMemory(here[t]->data(), here[t]->size()).ok());
    ASSERT_TRUE(b.RegisterMemory(there[t]->data(), there[t]->size()).ok());
  }
  Connect(a, b);
  std::atomic<int> failures{0};
  std::vector<std::string> first_error(kThreads);  // each thread writes its own
  auto run = [&](int t) {
    auto fail = [&](const std::string& why) {
      failures.fetch_add(1);
      if (first_error[t].empty()) first_error[t] = why;
    };
    for (int round = 1; round <= kRounds && failures.load() == 0; ++round) {
      const uint64_t n = sizes[t] != 0 ? sizes[t] : (round % 2 ? 4096 : 128 << 10);
      const bool write = t == 1 ? false : (t == 3 ? round % 3 != 0 : true);
      const uint64_t seed = uint64_t{1000} * t + round;
      uint8_t* local = here[t]->data();
      uint8_t* remote = there[t]->data();
      Fill(write ? local : remote, n, seed);
      auto h = MakeSimple(a, "b", write ? Op::kWrite : Op::kRead, local, remote, n);
      if (!h.ok()) return fail("make: " + h.status().ToString());
      Status s = PostAndWait(a, &h.value());
      if (!s.ok()) return fail("round " + std::to_string(round) + ": " + s.ToString());
      const int64_t bad = FirstMismatch(write ? remote : local, n, seed);
      if (bad >= 0)
        fail("round " + std::to_string(round) + ": first bad byte at " + std::to_string(bad));
      (void)a.Release(&h.value());
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(run, t);
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(first_error[t], "") << "thread " << t;
  EXPECT_TRUE(a.PeerError("b").ok()) << a.PeerError("b").ToString();
  // The posting threads did send some frames themselves (the lane is idle between
  // a thread's rounds), and none when inline posting is off.
  auto channel = a.impl()->PeerChannel("b");
  ASSERT_TRUE(channel.ok());
  auto* stream = dynamic_cast<core::StreamChannel*>(channel.value());
  ASSERT_NE(stream, nullptr);
  if (std::get<1>(GetParam()) == 0) {
    EXPECT_EQ(stream->inline_frames(), 0u);
  } else {
    EXPECT_GT(stream->inline_frames(), 0u) << "no post was sent inline";
  }
}

INSTANTIATE_TEST_SUITE_P(Streams, InlinePostTest,
                         ::testing::Combine(::testing::Values("shm", "tcp"),
                                            ::testing::Values(uint64_t{0}, uint64_t{16} << 10,
                                                              uint64_t{1} << 20)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_inline" +
                                  std::to_string(std::get<1>(info.param));
                         });

}  // namespace
}  // namespace kvlane::test
