// A tcp listener on 127.0.0.1 (a free port) whose accept loop runs on its own
// thread: the base of the tests' fake targets and proxies (scripted_target,
// handshake_test).
#pragma once

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <cstdint>
#include <functional>
#include <thread>
#include <utility>

#include "transport/stream/socket.h"

namespace kvlane::test {

class LoopbackListener {
 public:
  // Listens, then hands each accepted connection to `serve`, one at a time, on
  // the listener's thread, until Stop. Declare it after every member `serve`
  // uses, so that it stops before they go.
  explicit LoopbackListener(std::function<void(core::Fd)> serve) : serve_(std::move(serve)) {
    auto fd = core::ListenTcp("127.0.0.1", 0, &port_);
    EXPECT_TRUE(fd.ok()) << fd.status().ToString();
    if (!fd.ok()) return;
    fd_ = std::move(fd).value();
    thread_ = std::thread([this] { Loop(); });
  }
  ~LoopbackListener() { Stop(); }
  LoopbackListener(const LoopbackListener&) = delete;
  LoopbackListener& operator=(const LoopbackListener&) = delete;

  // Stops accepting and waits for the thread (`serve` returned). Idempotent.
  void Stop() {
    if (!thread_.joinable()) return;
    shutdown(fd_.get(), SHUT_RDWR);
    thread_.join();
  }
  uint16_t port() const { return port_; }

 private:
  void Loop() {
    for (;;) {
      auto c = core::Accept(fd_.get());
      if (c.ok()) {
        serve_(std::move(c).value());
      } else if (c.status().code() == Code::kCanceled) {
        return;
      }
    }
  }

  std::function<void(core::Fd)> serve_;
  uint16_t port_ = 0;
  core::Fd fd_;
  std::thread thread_;
};

}  // namespace kvlane::test
