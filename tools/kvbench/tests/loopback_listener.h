// A control listener on a loopback port the kernel picks, bound before the port
// is named to anyone: no other test or process can take the port between picking
// and binding it, as one picked free and bound later could be. Header-only; for
// the kvbench tests that run a rank 0 (real or fake) in this process.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>

#include "control_channel.h"

namespace kvbench::testing {

struct LoopbackListener {
  std::unique_ptr<ControlListener> listener;  // null when the bind failed (a test failure)
  uint16_t port = 0;
  std::string peer;  // "127.0.0.1:<port>", as --peer

  // Gives the socket to a rank 0's config (RunConfig::listen_fd; its session
  // closes it), -1 when there is none.
  int HandOver() { return listener ? listener->Release() : -1; }
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
