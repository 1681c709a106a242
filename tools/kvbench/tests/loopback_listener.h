// Loopback ports for the kvbench tests that run a rank 0 (real or fake) in this
// process, each bound before it is named to anyone: no other test or process can
// take it between picking and binding, as a port picked free and bound later
// could be. Header-only.
#pragma once

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "control_channel.h"
#include "loopback_address.h"

namespace kvbench::testing {

struct LoopbackListener {
  std::unique_ptr<ControlListener> listener;  // null when the bind failed (a test failure)
  uint16_t port = 0;
  std::string peer;  // "127.0.0.1:<port>", as --peer

  // Gives the socket to a rank 0's config (RunConfig::listen_fd; its session
  // closes it), -1 when there is none.
  int HandOver() { return listener ? listener->Release() : -1; }
};

// A loopback port bound for this object's life and never listened on: a connect
// there is refused, and no other process can take the port meanwhile (as one
// picked free and left unbound could be taken). port 0 when the bind failed (a
// test failure).
class RefusingPort {
 public:
  RefusingPort() {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ >= 0) port_ = BindLoopback(fd_);
    EXPECT_NE(port_, 0) << "binding a loopback port: " << std::strerror(errno);
  }
  ~RefusingPort() {
    if (fd_ >= 0) close(fd_);
  }
  RefusingPort(const RefusingPort&) = delete;
  RefusingPort& operator=(const RefusingPort&) = delete;
  uint16_t port() const { return port_; }

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
};

inline LoopbackListener ListenOnLoopback() {
  LoopbackListener l;
  auto listener = ControlListener::Listen("127.0.0.1:0");
  EXPECT_TRUE(listener.ok()) << listener.status().ToString();
  if (!listener.ok()) return l;
  auto port = (*listener)->Port();
  EXPECT_TRUE(port.ok()) << port.status().ToString();
  if (!port.ok()) return l;
  l.listener = std::move(listener).value();
  l.port = *port;
  l.peer = "127.0.0.1:" + std::to_string(l.port);
  return l;
}

}  // namespace kvbench::testing
