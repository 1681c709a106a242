// LaneQueue: one lane's ring of chunk slots. Posting threads reserve tickets in
// the order they take them; the lane's issue side consumes them in ticket order
// and its retire side frees them FIFO. Bounded: Push waits for a free slot.
//
// Thread-safety: Push from any thread; the issue cursor is owned by one thread
// and the retire cursor by one thread (they may be the same thread).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>

#include "kvlane/status.h"

namespace kvlane::core {

struct Request;

struct WorkItem {
  Request* req = nullptr;
  uint32_t chunk = 0;
  uint32_t gen = 0;
  uint32_t count = 1;     // chunks [chunk, chunk + count) this item carries
  bool canceled = false;  // set by the issue side when the request was canceled before start
};

class LaneQueue {
 public:
  explicit LaneQueue(uint32_t slots);

  // Reserves the next ticket and publishes `item`; waits (spin, then sleep) up
  // to `deadline` while the ring is full. kTimeout when it stays full, kCanceled
  // when `abandon` (the channel's closing flag) becomes true meanwhile.
  // `ring` false: the issue side is not woken (the caller then Ring()s, or
  // hands the item to Channel::Kick, which does when it leaves it queued).
  Status Push(const WorkItem& item, std::chrono::steady_clock::time_point deadline,
              const std::atomic<bool>& abandon, bool ring = true);
  // Whether the next `n` tickets' slots are free now, so that `n` Pushes would
  // not wait. A hint: other posting threads may take the room first. False
  // for more than the ring holds.
  bool HasRoom(uint32_t n) const {
    if (n == 0) return true;
    if (n > mask_ + 1) return false;
    const uint64_t last = tail_.load(std::memory_order_relaxed) + n - 1;
    // Free for ticket `last` once its cell was retired a lap ago (AdvanceRetire
    // stores the ticket it frees the cell for). A larger seq: another poster
    // took it since the load, which reads as no room.
    return cells_[last & mask_].seq.load(std::memory_order_acquire) == last;
  }
  // Wakes the issue side if it sleeps (a published item is waiting).
  void Ring() {
    doorbell_.fetch_add(1, std::memory_order_seq_cst);
    if (sleepers_.load(std::memory_order_seq_cst) != 0) doorbell_.notify_all();
  }

  // Issue side: the next published item, or nullptr.
  WorkItem* PeekIssue();
  void AdvanceIssue() { issue_.fetch_add(1, std::memory_order_release); }
  // The ticket PeekIssue() looks at.
  uint64_t issue_ticket() const { return issue_.load(std::memory_order_relaxed); }
  // Every ticket taken has been issued (none reserved and not yet published
  // either). Issue side.
  bool AllIssued() const {
    return tail_.load(std::memory_order_acquire) == issue_.load(std::memory_order_relaxed);
  }
  // Sleeps until an item may be available or Wake() is called (also a Wake()
  // that came before this call, since the previous one returned). Spins first.
  // REQUIRES: one waiting thread per queue (the issue side).
  void WaitForIssue(std::chrono::microseconds spin);

  // Retire side: the oldest issued item not yet retired, or nullptr.
  WorkItem* PeekRetire();
  void AdvanceRetire();
  bool HasUnretired() const { return retire_ < issue_.load(std::memory_order_acquire); }

  // Wakes any thread sleeping in WaitForIssue (stop, error latch).
  void Wake();

  // Bytes posted to this lane and not yet retired (a hint for lane choice).
  // Two counters, each on its side's cache line: posting threads add, the
  // retire side (or a post that failed to queue) takes away.
  uint64_t queued_bytes() const {
    const uint64_t taken = bytes_taken_.load(std::memory_order_relaxed);
    const uint64_t added = bytes_added_.load(std::memory_order_relaxed);
    return added > taken ? added - taken : 0;
  }
  void AddBytes(uint64_t n) { bytes_added_.fetch_add(n, std::memory_order_relaxed); }
  void TakeBytes(uint64_t n) { bytes_taken_.fetch_add(n, std::memory_order_relaxed); }

 private:
  struct Cell {
    std::atomic<uint64_t> seq;
    WorkItem item;
  };
  const uint64_t mask_;
  std::unique_ptr<Cell[]> cells_;
  // One cache line per side, so that a post does not pull lines the issue or
  // retire side keeps reading.
  alignas(64) std::atomic<uint64_t> tail_{0};   // next ticket to reserve
  std::atomic<uint64_t> bytes_added_{0};        // posting threads
  alignas(64) std::atomic<uint64_t> issue_{0};  // next ticket to issue
  alignas(64) uint64_t retire_ = 0;             // next ticket to retire
  std::atomic<uint64_t> bytes_taken_{0};        // the retire side
  alignas(64) std::atomic<uint32_t> doorbell_{0};
  std::atomic<uint32_t> sleepers_{0};
  std::atomic<bool> woken_{false};  // a Wake() not yet seen by WaitForIssue
};

}  // namespace kvlane::core
