// ConnectUnix against a listener whose accept queue is full: the connect is
// not made (the kernel answers EAGAIN), so it must not come back as a socket
// that looks connected; it waits for room until its deadline.
#include "transport/stream/socket.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "core/random.h"

namespace kvlane::test {
namespace {

using namespace std::chrono_literals;

// A listener on a fresh abstract name with the smallest backlog, that accepts
// only when told, and the connections that fill its queue.
class FullListener {
 public:
  FullListener() : name_("kvlane-socket-test-" + std::to_string(core::RandomU64())) {
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::memcpy(a.sun_path + 1, name_.data(), name_.size());  // abstract
    const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name_.size());
    fd_ = core::Fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    ok_ = fd_.valid() && bind(fd_.get(), reinterpret_cast<sockaddr*>(&a), len) == 0 &&
          listen(fd_.get(), 0) == 0;
    // Connects until the kernel refuses one for want of room (EAGAIN).
    for (int i = 0; ok_ && i < 64; ++i) {
      core::Fd c(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
      if (connect(c.get(), reinterpret_cast<sockaddr*>(&a), len) != 0) {
        full_ = errno == EAGAIN;
        break;
      }
      queued_.push_back(std::move(c));
    }
  }
  // Whether the queue was filled (a connect was refused with EAGAIN).
  bool full() const { return ok_ && full_; }
  const std::string& name() const { return name_; }
  // Accepts (and closes) every connection waiting; how many there were.
  int AcceptAll() {
    int n = 0;
    for (int c; (c = accept4(fd_.get(), nullptr, nullptr, SOCK_CLOEXEC)) >= 0; ++n) close(c);
    return n;
  }

 private:
  const std::string name_;
  core::Fd fd_;
  bool ok_ = false;
  bool full_ = false;
  std::vector<core::Fd> queued_;
};

// The connect waits for room and gives up at its deadline, as a timeout (it
// used to return the unconnected socket, whose peer then read as uid unknown).
TEST(SocketConnectUnix, FullAcceptQueueTimesOutThenConnectsOnceAccepted) {
  FullListener l;
  ASSERT_TRUE(l.full()) << "could not fill the listener's accept queue";
  const auto t0 = std::chrono::steady_clock::now();
  auto refused = core::ConnectUnix(l.name(), 300ms);
  const auto took = std::chrono::steady_clock::now() - t0;
  ASSERT_FALSE(refused.ok()) << "an unconnected socket came back as connected (uid "
                             << static_cast<int>(core::PeerCred(refused->get()).uid) << ")";
  EXPECT_EQ(refused.status().code(), Code::kTimeout) << refused.status().ToString();
  EXPECT_GE(took, 250ms) << "gave up before its deadline";
  EXPECT_LT(took, 5s) << "waited far past its deadline";
  EXPECT_GT(l.AcceptAll(), 0);
  auto connected = core::ConnectUnix(l.name(), 5s);
  ASSERT_TRUE(connected.ok()) << connected.status().ToString();
  EXPECT_EQ(core::PeerCred(connected->get()).uid, geteuid());
}

// A connect that finds the queue full succeeds once the listener makes room
// within its deadline.
TEST(SocketConnectUnix, FullAcceptQueueConnectsWhenRoomComesInTime) {
  FullListener l;
  ASSERT_TRUE(l.full()) << "could not fill the listener's accept queue";
  auto room = std::async(std::launch::async, [&] {
    std::this_thread::sleep_for(200ms);
    return l.AcceptAll();
  });
  auto connected = core::ConnectUnix(l.name(), 10s);
  EXPECT_GT(room.get(), 0);
  ASSERT_TRUE(connected.ok()) << connected.status().ToString();
  EXPECT_EQ(core::PeerCred(connected->get()).uid, geteuid()) << "the socket came back unconnected";
}

}  // namespace
}  // namespace kvlane::test
