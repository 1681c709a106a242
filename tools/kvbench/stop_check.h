// StopCheck: how a long step of a row (a pool wipe, fill or check, a burst, the
// reference's repetitions) asks, between its pieces, whether to give up: the
// caller's answer true ends the step at that piece boundary, unfinished. An
// empty StopCheck is never asked. StopPacer asks it once per kStopCheckBytes of
// work, so that a step over many small extents asks rarely and one over a few
// huge ones still asks often enough (about every 10-50 ms of host memory work).
// A KeepAlive is called, its answer none, while a step waits on work it cannot
// give up early (a burst's grace): the caller keeps a peer that waits for it from
// giving up. An empty KeepAlive is never called.
// Thread-compatible.
#pragma once

#include <cstdint>
#include <functional>

namespace kvbench {

using StopCheck = std::function<bool()>;
using KeepAlive = std::function<void()>;

inline constexpr uint64_t kStopCheckBytes = 64ull << 20;

class StopPacer {
 public:
  // REQUIRES: `stop` outlives the pacer.
  explicit StopPacer(const StopCheck& stop) : stop_(stop) {}
  // Counts `bytes` more work done; asks `stop` once kStopCheckBytes have gathered
  // since it last asked. Whether to give up now.
  bool Done(uint64_t bytes) {
    since_ += bytes;
    if (!stop_ || since_ < kStopCheckBytes) return false;
    since_ = 0;
    return stop_();
  }

 private:
  const StopCheck& stop_;
  uint64_t since_ = 0;
};

}  // namespace kvbench
