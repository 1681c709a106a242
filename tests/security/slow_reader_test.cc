// A notification to a target that takes its bytes slowly: each send of it moves
// a little and none waits io_timeout without moving any (what a socket with
// SO_SNDTIMEO gives while its peer reads a little at a time, its window kept
// nearly shut). SendNotification still ends within about twice the io_timeout,
// with timeout: it holds the channel's control connection, which a transfer's
// notification (on its lane's receiver) and the channel's Close wait for.
//
// Fault injection by symbol interposition (this executable only, not built
// under the sanitizers, which intercept sendmsg themselves): while `g_slow` is
// set, a sendmsg that begins a notification frame marks its descriptor, and
// every sendmsg on it moves one byte, 100 ms after it is called.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <string>

#include "scripted_target.h"
#include "test_util.h"
#include "transport/stream/wire.h"

namespace {
std::atomic<bool> g_slow{false};
std::atomic<int> g_slow_fd{-1};

bool BeginsANotification(const struct msghdr* msg) {
  kvlane::core::FrameHeader h{};
  if (msg->msg_iovlen == 0 || msg->msg_iov[0].iov_len < sizeof(h)) return false;
  std::memcpy(&h, msg->msg_iov[0].iov_base, sizeof(h));
  return h.type == static_cast<uint8_t>(kvlane::core::FrameType::kNotify);
}
}  // namespace

extern "C" ssize_t sendmsg(int fd, const struct msghdr* msg, int flags) {
  if (g_slow.load() && g_slow_fd.load() < 0 && BeginsANotification(msg)) g_slow_fd = fd;
  if (!g_slow.load() || fd != g_slow_fd.load()) return syscall(SYS_sendmsg, fd, msg, flags);
  usleep(100 * 1000);
  struct msghdr one = *msg;
  struct iovec byte {};
  for (size_t i = 0; i < msg->msg_iovlen; ++i) {
    if (msg->msg_iov[i].iov_len == 0) continue;
    byte = {msg->msg_iov[i].iov_base, 1};
    break;
  }
  one.msg_iov = &byte;
  one.msg_iovlen = 1;
  return syscall(SYS_sendmsg, fd, &one, flags);
}

namespace kvlane::test {
namespace {

using namespace std::chrono_literals;

TEST(SlowReader, NotificationSendEndsWithinTheIoTimeout) {
  // Reads nothing after the Hello (its kernel takes what fits): the slowness is
  // the initiator's sends' (above).
  ScriptedTarget target(/*answer=*/nullptr);
  const AgentOptions o = OneLaneTcp(1000ms);
  auto a_or = Agent::Create(o);
  ASSERT_TRUE(a_or.ok());
  std::unique_ptr<Agent> a = std::move(a_or).value();
  ASSERT_TRUE(a->LoadPeer(target.Blob()).ok());
  ASSERT_TRUE(a->PeerTransport("target").ok());  // connected at full speed
  g_slow = true;
  const auto t0 = std::chrono::steady_clock::now();
  // 124 bytes with its header: 12.4 s at a byte per send.
  Status s = a->SendNotification("target", std::string(100, 'n'));
  const auto took = std::chrono::steady_clock::now() - t0;
  g_slow = false;
  g_slow_fd = -1;
  EXPECT_EQ(s.code(), Code::kTimeout) << s.ToString();
  EXPECT_LT(took, o.io_timeout * 2 + 1s)
      << "SendNotification took "
      << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
      << " ms (io_timeout 1000 ms)";
}

}  // namespace
}  // namespace kvlane::test
