// Burst: `batch` requests, each its own prepared transfer over a disjoint slice
// of the block tables; post all, then wait for all. Times the burst and each
// request's completion offset from the burst start (host-observed, via Check).
// Owns its transfer handles; one thread at a time.
#pragma once

#include <chrono>
#include <vector>

#include "burst_map.h"
#include "kvlane/agent.h"

namespace kvbench {

struct BurstTiming {
  double total_ms = 0;             // first post to the last completion seen
  std::vector<double> request_ms;  // per request: completion offset from the first post
  kvlane::Status status;           // the first error, if any
};

class Burst {
 public:
  // Makes one transfer per request (the timed "prep" of a row).
  static kvlane::Result<Burst> Make(kvlane::Agent* agent, kvlane::Op op, kvlane::PreparedId local,
                                    kvlane::PreparedId remote, const BurstMap& map);
  Burst(Burst&&) = default;
  Burst& operator=(Burst&&) = delete;
  ~Burst();

  // Segments of every request together, as the engine planned them (adjacent
  // descriptor pairs merged).
  uint64_t segments() const { return segments_; }

  // Posts every request, then polls Check until all end or `timeout` passes.
  BurstTiming Run(std::chrono::milliseconds timeout);

 private:
  explicit Burst(kvlane::Agent* agent) : agent_(agent) {}
  void Release();

  kvlane::Agent* agent_;
  std::vector<kvlane::XferHandle> handles_;
  uint64_t segments_ = 0;
};

}  // namespace kvbench
