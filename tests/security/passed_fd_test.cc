// A same-host peer that sends a descriptor on its connection to an shm
// listener, one whose close blocks (a TCP socket with unsent data and a long
// linger: its close waits for the data to leave, which its reader never lets).
// Any local user may connect before proving anything. The descriptor must
// hold neither the server (the next connection gets its challenge) nor the
// agent's close.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

#include "raw_peer.h"
#include "test_util.h"

namespace kvlane::test {
namespace {

using namespace std::chrono_literals;

// A connected loopback TCP pair: `sender` has unsent data queued and lingers
// for `linger_s` on close; `reader` never reads.
struct StuckTcp {
  core::Fd sender, reader;
};

StuckTcp MakeStuckTcp(int linger_s) {
  StuckTcp t;
  uint16_t port = 0;
  auto l = core::ListenTcp("127.0.0.1", 0, &port);
  if (!l.ok()) return t;
  auto s = core::ConnectTcp("127.0.0.1", port, 2s);
  auto r = core::Accept(l->get());
  if (!s.ok() || !r.ok()) return t;
  t.sender = std::move(s).value();
  t.reader = std::move(r).value();
  const int fl = fcntl(t.sender.get(), F_GETFL);
  fcntl(t.sender.get(), F_SETFL, fl | O_NONBLOCK);
  std::vector<char> chunk(64 << 10, 'q');
  while (send(t.sender.get(), chunk.data(), chunk.size(), MSG_NOSIGNAL) > 0) {
  }
  fcntl(t.sender.get(), F_SETFL, fl);
  const linger lg{1, linger_s};
  setsockopt(t.sender.get(), SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
  return t;
}

// Sends one byte carrying `fd`; the errno of sendmsg, or 0.
int SendDescriptor(int sock, int fd) {
  char byte = 'x';
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
  return sendmsg(sock, &msg, MSG_NOSIGNAL) == 1 ? 0 : errno;
}

TEST(PassedDescriptor, HoldsNeitherTheShmServerNorTheAgentsClose) {
  AgentOptions o = OptionsFor("target", "shm");
  o.connect_timeout = 500ms;
  auto made = Agent::Create(o);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  std::unique_ptr<Agent> target = std::move(made).value();
  const TargetInfo info = Inspect(target->ExportMetadata().value());

  StuckTcp stuck = MakeStuckTcp(30);
  ASSERT_TRUE(stuck.sender.valid() && stuck.reader.valid());
  {
    auto evil = RawPeer::Connect("shm", info.meta);
    ASSERT_TRUE(evil.has_value());
    const int err = SendDescriptor(evil->fd(), stuck.sender.get());
    // Refused by the kernel (SO_PASSRIGHTS off on the listener), or taken and
    // then closed by the server with the connection.
    EXPECT_TRUE(err == 0 || err == EPERM) << std::strerror(err);
    if (err != 0) {  // ours is the only copy: close it without waiting
      const linger now{1, 0};
      setsockopt(stuck.sender.get(), SOL_SOCKET, SO_LINGER, &now, sizeof(now));
    }
    stuck.sender.Reset();  // the server's copy, if it took one, is the last
  }                        // the connection ends: the server closes it, and what it carried

  auto next = RawPeer::Connect("shm", info.meta);
  ASSERT_TRUE(next.has_value());
  EXPECT_TRUE(next->ReadChallenge(3s).has_value())
      << "the server served no new connection: a peer's descriptor held it";
  next.reset();

  std::atomic<bool> closed{false};
  std::thread closer([&] {
    target.reset();
    closed = true;
  });
  for (int i = 0; i < 500 && !closed; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_TRUE(closed) << "the agent's close waited on a peer's descriptor";
  stuck.reader.Reset();  // lets a blocked close end (the sender is reset)
  closer.join();
}

}  // namespace
}  // namespace kvlane::test
