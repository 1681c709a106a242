#include "core/lane_queue.h"

#include <thread>

namespace kvlane::core {
namespace {

void CpuRelax() {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#endif
}

}  // namespace

LaneQueue::LaneQueue(uint32_t slots) : mask_(slots - 1), cells_(new Cell[slots]) {
  for (uint32_t i = 0; i < slots; ++i) cells_[i].seq.store(i, std::memory_order_relaxed);
}

Status LaneQueue::Push(const WorkItem& item, std::chrono::steady_clock::time_point deadline,
                       const std::atomic<bool>& abandon, bool ring) {
  uint32_t spins = 0;
  uint64_t t = tail_.load(std::memory_order_relaxed);
  for (;;) {
    Cell& cell = cells_[t & mask_];
    // Acquire pairs with the release in AdvanceRetire(): the slot is free.
    uint64_t seq = cell.seq.load(std::memory_order_acquire);
    if (seq == t) {
      if (tail_.compare_exchange_weak(t, t + 1, std::memory_order_relaxed)) {
        cell.item = item;
        // Release pairs with the acquire in PeekIssue(): the item is written.
        cell.seq.store(t + 1, std::memory_order_release);
        if (ring) Ring();
        return Status::Ok();
      }
      continue;  // t reloaded by the failed CAS
    }
    if (seq > t) {  // another producer took ticket t
      t = tail_.load(std::memory_order_relaxed);
      continue;
    }
    // Ring full: wait for the retire side, which needs the issue side awake
    // (items queued without a ring included).
    if (!ring) {
      Ring();
      ring = true;
    }
    if (abandon.load(std::memory_order_acquire)) return Status::Canceled("lane closed while posting");
    if (std::chrono::steady_clock::now() > deadline)
      return Status::Timeout("lane ring stayed full for the whole post timeout");
    if (++spins < 256) {
      CpuRelax();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    t = tail_.load(std::memory_order_relaxed);
  }
}

WorkItem* LaneQueue::PeekIssue() {
  uint64_t i = issue_.load(std::memory_order_relaxed);
  Cell& cell = cells_[i & mask_];
  return cell.seq.load(std::memory_order_acquire) == i + 1 ? &cell.item : nullptr;
}

void LaneQueue::WaitForIssue(std::chrono::microseconds spin) {
  // A Wake() since the last wait returns at once: the caller checked its stop
  // condition before calling, and the wake may have come in between.
  if (woken_.exchange(false, std::memory_order_seq_cst)) return;
  auto until = std::chrono::steady_clock::now() + spin;
  while (std::chrono::steady_clock::now() < until) {
    if (PeekIssue() != nullptr) return;
    CpuRelax();
  }
  sleepers_.fetch_add(1, std::memory_order_seq_cst);
  uint32_t bell = doorbell_.load(std::memory_order_seq_cst);
  // seq_cst: if the exchange misses Wake()'s store, its doorbell bump follows
  // our load of `bell`, so the wait below returns at once.
  if (PeekIssue() == nullptr && !woken_.exchange(false, std::memory_order_seq_cst))
    doorbell_.wait(bell, std::memory_order_seq_cst);
  sleepers_.fetch_sub(1, std::memory_order_seq_cst);
}

WorkItem* LaneQueue::PeekRetire() {
  if (retire_ >= issue_.load(std::memory_order_acquire)) return nullptr;
  return &cells_[retire_ & mask_].item;
}

void LaneQueue::AdvanceRetire() {
  // Release pairs with the acquire in Push(): the slot may be reused.
  cells_[retire_ & mask_].seq.store(retire_ + mask_ + 1, std::memory_order_release);
  ++retire_;
}

void LaneQueue::Wake() {
  woken_.store(true, std::memory_order_seq_cst);  // sticky until the next WaitForIssue
  doorbell_.fetch_add(1, std::memory_order_seq_cst);
  doorbell_.notify_all();
}

}  // namespace kvlane::core
