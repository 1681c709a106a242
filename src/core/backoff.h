// Backoff: the sleep of a wait that polls something another thread (or a peer)
// will change, once spinning or yielding no longer pays: 10 us, doubling at
// each nap up to 1 ms. Bounds the CPU such a wait takes while keeping the first
// naps short. Pause() yields a few times before it naps, for a wait that is
// usually a race with another thread's next few instructions.
//
// Thread-safety: one per wait, on the waiting thread.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <thread>

namespace kvlane::core {

class Backoff {
 public:
  // Yields of Pause() before it naps. A yield costs about a microsecond when no
  // other thread wants the CPU (and hands it over when one does), so a race
  // that ends within a few microseconds costs no timer sleep, whose slack alone
  // is ~50 us; a wait that lasts is past them within ~50 us and sleeps.
  static constexpr uint32_t kYields = 50;

  // Sleeps 10 us, doubling at each call up to 1 ms.
  void Nap() {
    std::this_thread::sleep_for(nap_);
    nap_ = std::min<std::chrono::microseconds>(2 * nap_, std::chrono::milliseconds(1));
    ++naps_;
  }

  // Yields for the first kYields calls, then Nap()s.
  void Pause() {
    if (yields_ < kYields) {
      ++yields_;
      std::this_thread::yield();
      return;
    }
    Nap();
  }

  // How many times this one slept (Nap, or Pause past its yields).
  uint64_t naps() const { return naps_; }

 private:
  std::chrono::microseconds nap_{10};
  uint32_t yields_ = 0;
  uint64_t naps_ = 0;
};

}  // namespace kvlane::core
