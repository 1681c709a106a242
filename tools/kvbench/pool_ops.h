// Verification steps on a pool wherever it lives: host pools are touched in
// place (burst_check.h); device pools by kernels on their GPU, one launch per
// descriptor list (device_check.h), every byte checked there. Thread-compatible.
#pragma once

#include <cstdint>

#include "burst_check.h"
#include "kvlane/memory.h"
#include "kvlane/status.h"

namespace kvbench {

struct PoolView {
  uint8_t* base = nullptr;  // host pointer, or device pointer for kCuda
  kvlane::MemoryKind kind = kvlane::MemoryKind::kHost;
  int device = 0;  // kCuda: the GPU the pool lives on
};

kvlane::Status FillSources(const PoolView& pool, const PoolList& list,
                           const RequestIndices& indices, uint32_t rank, uint64_t epoch);
kvlane::Status WipeDestinations(const PoolView& pool, const PoolList& list,
                                const RequestIndices& indices);
kvlane::Result<VerifyResult> VerifyDestinations(const PoolView& pool, const PoolList& list,
                                                const RequestIndices& dst,
                                                const RequestIndices& src, uint32_t src_rank,
                                                uint64_t epoch);
kvlane::Status FlipOneLandedByte(const PoolView& pool, const PoolList& list,
                                 const RequestIndices& dst);

}  // namespace kvbench
