// Burst: `batch` requests, each its own prepared transfer over a disjoint slice
// of the block tables; post all, then wait for all. Times the burst and each
// request's completion offset from the burst start (host-observed, via Check).
// Owns its transfer handles; one thread at a time.
#pragma once

#include <chrono>
#include <vector>

#include "burst_map.h"
#include "kvlane/agent.h"
#include "stop_check.h"

namespace kvbench {

struct BurstTiming {
  double total_ms = 0;             // first post to the last completion seen
  std::vector<double> request_ms;  // per request: completion offset from the first post
  kvlane::Status status;           // the first error, if any
  bool abandoned = false;          // a stop ended it early (status kCanceled): not a timing
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
  // With a `stop`, asks it every kStopEvery while requests are pending; once it
  // answers true the burst is abandoned: the requests no lane has started are
  // canceled and the others waited for (a request a lane owns runs to its end;
  // still within `timeout`), so that no request is in flight when Run returns
  // unless `timeout` passed.
  BurstTiming Run(std::chrono::milliseconds timeout, const StopCheck& stop = {});

  static constexpr std::chrono::milliseconds kStopEvery{10};

 private:
  explicit Burst(kvlane::Agent* agent) : agent_(agent) {}
  void Release();
  // Cancels the requests not `done` and waits for them until `deadline`; the
  // first error other than their cancellation.
  kvlane::Status Abandon(const std::vector<bool>& done,
                         std::chrono::steady_clock::time_point deadline);

  kvlane::Agent* agent_;
  std::vector<kvlane::XferHandle> handles_;
  uint64_t segments_ = 0;
};

}  // namespace kvbench
