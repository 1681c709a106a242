// Backoff: the sleep of a wait that polls something another thread (or a peer)
// will change, once spinning or yielding no longer pays: 10 us, doubling at
// each nap up to 1 ms. Bounds the CPU such a wait takes while keeping the first
// naps short.
//
// Thread-safety: one per wait, on the waiting thread.
#pragma once

#include <algorithm>
#include <chrono>
#include <thread>

namespace kvlane::core {

class Backoff {
 public:
  void Nap() {
    std::this_thread::sleep_for(nap_);
    nap_ = std::min<std::chrono::microseconds>(2 * nap_, std::chrono::milliseconds(1));
  }

 private:
  std::chrono::microseconds nap_{10};
};

}  // namespace kvlane::core
