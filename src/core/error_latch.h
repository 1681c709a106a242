// ErrorLatch: the first fatal error of a connection, kept forever.
// Thread-safety: Latch() from any thread; Get() is a lock-free read once latched.
#pragma once

#include <atomic>
#include <mutex>
#include <string>

#include "kvlane/status.h"

namespace kvlane::core {

class ErrorLatch {
 public:
  // Records `s` if nothing is latched yet. Returns true when this call latched.
  bool Latch(const Status& s) {
    if (!s.is_error() || latched()) return false;
    std::lock_guard lock(mu_);
    if (code_.load(std::memory_order_relaxed) != 0) return false;
    message_ = s.message();
    // Release pairs with the acquire in latched()/Get(): message_ is written first.
    code_.store(static_cast<int32_t>(s.code()), std::memory_order_release);
    return true;
  }
  bool latched() const { return code_.load(std::memory_order_acquire) != 0; }
  Status Get() const {
    int32_t c = code_.load(std::memory_order_acquire);
    if (c == 0) return Status::Ok();
    return Status(static_cast<Code>(c), "latched: " + message_);
  }

 private:
  std::atomic<int32_t> code_{0};
  std::mutex mu_;
  std::string message_;  // written once before code_ is published
};

}  // namespace kvlane::core
