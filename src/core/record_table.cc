#include "core/record_table.h"

#include <cstdlib>
#include <mutex>
#include <new>
#include <vector>

#include "core/request.h"

namespace kvlane::core {
namespace {

// Abandoned blocks, kept for the life of the process and reachable from here (a
// leak checker sees a block a device may still write as held, not lost). Never
// destroyed, so the list outlives every static destructor.
void KeepForever(void* block) {
  static std::mutex* mu = new std::mutex;
  static std::vector<void*>* kept = new std::vector<void*>;
  std::lock_guard lock(*mu);
  kept->push_back(block);
}

}  // namespace

RecordTable::RecordTable(uint32_t slots, uint32_t first_gen) : slots_(slots) {
  constexpr size_t kPage = 4096;
  bytes_ = (size_t{slots} * kStride + kPage - 1) / kPage * kPage;
  base_ = static_cast<uint8_t*>(std::aligned_alloc(kPage, bytes_));
  if (base_ == nullptr) throw std::bad_alloc();
  for (uint32_t i = 0; i < slots; ++i)
    new (base_ + size_t{i} * kStride) std::atomic<uint64_t>(PackRecord(first_gen, Code::kNotFound));
}

RecordTable::~RecordTable() {
  if (abandoned())
    KeepForever(base_);
  else
    std::free(base_);
}

}  // namespace kvlane::core
