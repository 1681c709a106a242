#include "core/record_table.h"

#include <cstdlib>
#include <new>

#include "core/request.h"

namespace kvlane::core {

RecordTable::RecordTable(uint32_t slots, uint32_t first_gen) : slots_(slots) {
  constexpr size_t kPage = 4096;
  bytes_ = (size_t{slots} * kStride + kPage - 1) / kPage * kPage;
  base_ = static_cast<uint8_t*>(std::aligned_alloc(kPage, bytes_));
  if (base_ == nullptr) throw std::bad_alloc();
  for (uint32_t i = 0; i < slots; ++i)
    new (base_ + size_t{i} * kStride) std::atomic<uint64_t>(PackRecord(first_gen, Code::kNotFound));
}

RecordTable::~RecordTable() {
  if (!abandoned()) std::free(base_);
}

}  // namespace kvlane::core
