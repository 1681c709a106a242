// Verification steps on a pool wherever it lives: host pools are touched in
// place (burst_check.h); device pools by kernels on their GPU, one launch per
// descriptor list (device_check.h), every byte checked there. Thread-compatible.
//
// A StopCheck (stop_check.h) lets a caller give up partway: a host pool's step
// asks it between extents and returns kCanceled, unfinished, once it answers
// true; a device pool's step asks it once before its launch and otherwise runs
// whole (one kernel over the burst's bytes, at device memory bandwidth).
#pragma once

#include <cstdint>

#include "burst_check.h"
#include "kvlane/memory.h"
#include "kvlane/status.h"
#include "stop_check.h"

namespace kvbench {

struct PoolView {
  uint8_t* base = nullptr;  // host pointer, or device pointer for kCuda
  kvlane::MemoryKind kind = kvlane::MemoryKind::kHost;
  int device = 0;  // kCuda: the GPU the pool lives on
};

kvlane::Status FillSources(const PoolView& pool, const PoolList& list,
                           const RequestIndices& indices, uint32_t rank, uint64_t epoch,
                           const StopCheck& stop = {});
kvlane::Status WipeDestinations(const PoolView& pool, const PoolList& list,
                                const RequestIndices& indices, const StopCheck& stop = {});
kvlane::Result<VerifyResult> VerifyDestinations(const PoolView& pool, const PoolList& list,
                                                const RequestIndices& dst,
                                                const RequestIndices& src, uint32_t src_rank,
                                                uint64_t epoch, const StopCheck& stop = {});
kvlane::Status FlipOneLandedByte(const PoolView& pool, const PoolList& list,
                                 const RequestIndices& dst);

}  // namespace kvbench
