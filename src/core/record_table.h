// RecordTable: the terminal records of an agent's request slots (Request::record),
// one per 64-byte line in one page-aligned block of host memory. A transport may
// map the block for a device: the cuda transport's GPU writes a record itself,
// after the data it copied is visible (see Channel::TakeDirect).
//
// Thread-safety: the records are atomics; the table itself is fixed after
// construction.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace kvlane::core {

class RecordTable {
 public:
  static constexpr size_t kStride = 64;  // bytes between two records

  // REQUIRES: slots >= 1. Every record reads as generation `first_gen`, not
  // found. An agent picks it at random, so that another agent's handle (same slot,
  // its own generations) reads stale here rather than naming this agent's transfer.
  RecordTable(uint32_t slots, uint32_t first_gen);
  ~RecordTable();  // frees the block unless Abandon() was called (then keeps it)
  RecordTable(const RecordTable&) = delete;
  RecordTable& operator=(const RecordTable&) = delete;

  std::atomic<uint64_t>& at(uint32_t slot) {
    return *reinterpret_cast<std::atomic<uint64_t>*>(base_ + size_t{slot} * kStride);
  }
  void* base() const { return base_; }
  size_t bytes() const { return bytes_; }  // a multiple of the page size
  uint32_t slots() const { return slots_; }

  // A device may still write records (a request left poisoned at close): the
  // block is never freed (the destructor moves it to a process-wide list, so it
  // stays reachable), and a transport that mapped it leaves it mapped. A bounded
  // leak, once per agent that closed so.
  void Abandon() { abandoned_.store(true, std::memory_order_release); }
  bool abandoned() const { return abandoned_.load(std::memory_order_acquire); }

 private:
  uint32_t slots_;
  size_t bytes_;
  uint8_t* base_;
  std::atomic<bool> abandoned_{false};
};

}  // namespace kvlane::core
