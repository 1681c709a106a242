// Per-hop timestamps of a post on a cuda lane, compiled in only when KVLANE_HOP_TRACE is
// defined (the benchmark's trace build, scripts/gpu-check.sh): the benchmark
// posts one request at a time and reads where its time went. Elsewhere the
// macro is empty.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace kvlane::core {

enum Hop : int {
  kHopQueued = 0,    // Post queued the request on its lane
  kHopIssue,         // a thread took the item off the lane queue
  kHopBuilt,         // checks done, the proxy entry or launch is next
  kHopSubmitted,     // the proxy entry or the launch is out
  kHopDoneSeen,      // the retire thread read the completion word
  kHopPublished,     // the terminal record is written
  kHopCount
};

struct HopTrace {
  std::atomic<int64_t> t[kHopCount];  // steady_clock nanoseconds
  std::atomic<uint32_t> by_poster{0};  // the last batch was issued by the posting thread
};

inline HopTrace& Hops() {
  static HopTrace h;
  return h;
}

inline int64_t HopNow() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace kvlane::core

#if defined(KVLANE_HOP_TRACE)
#define KVLANE_HOP(h) ::kvlane::core::Hops().t[h].store(::kvlane::core::HopNow(), std::memory_order_relaxed)
#define KVLANE_HOP_BY_POSTER(v) ::kvlane::core::Hops().by_poster.store(v, std::memory_order_relaxed)
#else
#define KVLANE_HOP(h) ((void)0)
#define KVLANE_HOP_BY_POSTER(v) ((void)0)
#endif
