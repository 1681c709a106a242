// StagingCopy::kBatch's half of the cuda copier (cuda_copier.cc): a window's
// device ranges go to the copy engines with one cudaMemcpyBatchAsync, except
// short ranges into device memory, which go one cudaMemcpyAsync each.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "core/device_copier.h"
#include "gpu/copy_types.h"
#include "kvlane/status.h"

namespace kvlane::core {

// One device's queued ranges, per window half. Not thread-safe (one staging
// thread). Every call: REQUIRES the device current.
class CeBatch {
 public:
  // Copies into device memory shorter than this are issued one by one: the
  // driver carries them inside its command stream at CPU speed, in a batch
  // too (a 1 MiB window of 22,528-byte ranges took 190-256 us as one batch,
  // against 142-149 us one call per range, and through device scratch and a
  // device-to-device batch 256 us; session 12's cuda_copier_probe). Longer
  // ones, and every copy out of device memory, gain from the batch
  // (1.1-3.5x the per-range calls in the same runs).
  static constexpr size_t kInlineBelow = 32u << 10;

  CeBatch() = default;
  CeBatch(const CeBatch&) = delete;
  CeBatch& operator=(const CeBatch&) = delete;

  // Queues `s` (to_host: out of device memory) for half h's next Issue.
  void Add(int h, const gpu::CopySeg& s);
  // Issues half h's queued copies on `stream`.
  Status Issue(int h, cudaStream_t stream);
  // After `stream` of half h was synchronized: forgets what was issued.
  void Reset(int h);

 private:
  struct Half {
    std::vector<void*> dsts;  // copies of batch calls (kept until Reset)
    std::vector<const void*> srcs;
    std::vector<size_t> sizes;
    size_t issued = 0;  // [0, issued) went to the GPU
  };

  // The driver (or this toolkit, before CUDA 13) has no batch call: one call per copy.
  bool batch_refused_ = false;
  Half half_[DeviceCopier::kHalves];
};

}  // namespace kvlane::core
