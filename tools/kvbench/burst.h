// Burst: `batch` requests, each its own prepared transfer over a disjoint slice
// of the block tables; post all, then wait for all. Times the burst and each
// request's completion offset from the burst start (host-observed, via Check).
// Owns its transfer handles; one thread at a time.
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "burst_map.h"
#include "kvlane/agent.h"
#include "stop_check.h"
#include "transfer_ops.h"

namespace kvbench {

struct BurstTiming {
  double total_ms = 0;             // first post to the last completion seen
  std::vector<double> request_ms;  // per request: completion offset from the first post
  kvlane::Status status;           // the first error, if any
  bool abandoned = false;          // a stop ended it early (status kCanceled): not a timing
  // Requests a lane still ran when Run gave up on them (a timeout, or a stop, once the
  // timeout and the grace had passed): their memory is still in use.
  size_t still_running = 0;
};

class Burst {
 public:
  // Makes one transfer per request (the timed "prep" of a row). Its grace (Run) is
  // the agent's io_timeout: the engine fails a lane that makes no progress that long.
  static kvlane::Result<Burst> Make(kvlane::Agent* agent, kvlane::Op op, kvlane::PreparedId local,
                                    kvlane::PreparedId remote, const BurstMap& map);
  // A burst over `handles` made elsewhere, its calls going to `ops` (a test's stand-in
  // for the engine), with `grace` as Run's. REQUIRES: `ops` outlives the burst.
  static Burst Over(TransferOps* ops, std::vector<kvlane::XferHandle> handles,
                    std::chrono::milliseconds grace);
  Burst(Burst&& other) noexcept;
  Burst& operator=(Burst&&) = delete;
  // Releases every handle without waiting: a request a lane still holds (only after a
  // Run that left it running) keeps its slot in the agent, and deregistering the memory
  // it uses waits for it (kvlane/agent.h), so that memory is not freed under it.
  ~Burst();

  // Segments of every request together, as the engine planned them (adjacent
  // descriptor pairs merged).
  uint64_t segments() const { return segments_; }

  // Posts every request, then polls Check until all end. With a `stop`, asks it every
  // kStopEvery while requests are pending. Once `timeout` has passed since the first
  // post, or `stop` answered true, the burst ends early: the requests no lane has
  // started are canceled and the others waited for, until timeout + grace after the
  // first post; so Run returns within that bound (a request still running then is
  // counted in still_running, and left running). Its status: a timeout is kTimeout,
  // naming the timeout and what became of the pending requests; a stop (abandoned)
  // kCanceled, or kTimeout when a request still ran, or the first error of one that
  // ended meanwhile. With a `keep_alive`, calls it about every kStopEvery from the
  // first post to the end, the grace included (when `stop` is no longer asked).
  // REQUIRES: no earlier Run left a request running.
  BurstTiming Run(std::chrono::milliseconds timeout, const StopCheck& stop = {},
                  const KeepAlive& keep_alive = {});

  static constexpr std::chrono::milliseconds kStopEvery{10};

 private:
  explicit Burst(TransferOps* ops) : ops_(ops) {}
  void Release();
  // Posts every request; one refused ends at once (its error kept). How many are pending.
  size_t PostAll(std::vector<bool>* done, BurstTiming* t);
  // Checks the pending requests once, recording the ends; how many ended.
  size_t Sweep(std::chrono::steady_clock::time_point t0, std::vector<bool>* done, BurstTiming* t);

  std::unique_ptr<TransferOps> own_ops_;  // the agent's, for a burst Make made
  TransferOps* ops_;
  std::vector<kvlane::XferHandle> handles_;
  uint64_t segments_ = 0;
  std::chrono::milliseconds grace_{0};
};

}  // namespace kvbench
