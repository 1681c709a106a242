// The lane a post that is not striped goes to (AgentImpl::PickLane): the one
// with the fewest bytes queued, so that a small transfer does not wait behind
// bulk work; of the least loaded, the lane of the request's previous post (its
// stream and lines are warm: a repost of a 2 MiB cuda copy starts 0.4-0.6 us
// sooner there, docs/perf/2026-11-30-session8.md section 4), else the first
// from `rotation` on.
#pragma once

#include <cstdint>

namespace kvlane::core {

// `queued(i)` is lane i's queued bytes (read once each; they may move under
// the caller). `last` is the previous post's lane, -1 for none (or out of
// range: ignored). REQUIRES: n >= 1.
template <class Queued>
int LeastLoadedLane(int n, uint32_t rotation, int last, Queued&& queued) {
  int best = 0;
  uint64_t best_bytes = UINT64_MAX;
  uint64_t last_bytes = UINT64_MAX;
  for (int k = 0; k < n; ++k) {
    const int i =
        static_cast<int>((rotation + static_cast<uint32_t>(k)) % static_cast<uint32_t>(n));
    const uint64_t b = queued(i);
    if (i == last) last_bytes = b;
    if (b < best_bytes) best = i, best_bytes = b;
  }
  return last >= 0 && last < n && last_bytes <= best_bytes ? last : best;
}

}  // namespace kvlane::core
