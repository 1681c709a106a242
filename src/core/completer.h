// Completer: turns retired chunks into published terminal records, under the
// agent's progress policy, and wakes threads blocked in Wait().
//
// independent: a request is published as soon as its own last chunk retires.
// global-fifo: requests are published in global post order (the old
// behaviour), so a finished request waits for every earlier one.
//
// Thread-safety: thread-safe; OnPost is called by posting threads, FinishChunk
// by lane threads.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <vector>

#include "core/lane_queue.h"
#include "core/request.h"
#include "kvlane/options.h"

namespace kvlane::core {

class Completer {
 public:
  Completer(ProgressPolicy policy, uint32_t max_requests);

  ProgressPolicy policy() const { return policy_; }
  // REQUIRES: r->gen set, record in progress. Takes the global order (global-fifo).
  void OnPost(Request* r);
  // A lane let go of chunk `w` with status `s`.
  void FinishChunk(const WorkItem& w, const Status& s);
  // Drops `n` references of a post (chunks never launched, and Post's own +1).
  void DropPending(Request* r, int64_t n);
  // The lanes let go of post `gen` of `r`, which a device already published
  // (a successful direct post: its pending count is left as it is).
  void Settle(Request* r, uint32_t gen);

  // Blocks until the record of (slot, gen) is terminal or the deadline passes.
  void WaitPublished(const std::atomic<uint64_t>& record, uint32_t gen,
                     std::chrono::steady_clock::time_point deadline);

 private:
  void Done(Request* r);
  void Publish(Request* r);
  void WakeWaiters();

  const ProgressPolicy policy_;
  std::mutex order_mu_;
  std::vector<Request*> order_;  // GUARDED_BY(order_mu_), ring indexed by seq
  uint64_t order_head_ = 0;      // GUARDED_BY(order_mu_)
  uint64_t order_tail_ = 0;      // GUARDED_BY(order_mu_)
  std::mutex wait_mu_;
  std::condition_variable wait_cv_;
  std::atomic<uint32_t> waiters_{0};
};

}  // namespace kvlane::core
