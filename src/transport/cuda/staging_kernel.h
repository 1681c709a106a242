// StagingCopy::kKernel's half of the cuda copier (cuda_copier.cc): short
// device ranges of a window held back and moved by one copy kernel.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/device_copier.h"
#include "gpu/copy_types.h"
#include "kvlane/status.h"

namespace kvlane::core {

// One device's held ranges, per window half. Not thread-safe (one staging
// thread). Every call: REQUIRES the device current.
class KernelBatch {
 public:
  // Ranges shorter than this go to the kernel (see StagingCopy::kKernel).
  static constexpr size_t kBelow = 64u << 10;

  KernelBatch() = default;
  // REQUIRES: every kernel launched finished (the streams were synchronized).
  ~KernelBatch();
  KernelBatch(const KernelBatch&) = delete;
  KernelBatch& operator=(const KernelBatch&) = delete;

  // Holds `s` for half h's next launch on `stream`; a full table is launched
  // and waited for first.
  Status Hold(int h, const gpu::CopySeg& s, bool to_host, cudaStream_t stream);
  // Launches what half h holds (one kernel); nothing when it holds nothing.
  Status Launch(int h, cudaStream_t stream);
  // After `stream` of half h was synchronized: the table is free again. The
  // error of a launch that failed (its ranges were dropped), else ok.
  Status Reset(int h);

 private:
  static constexpr uint32_t kSegs = 4096;  // ranges held per half before a launch and wait
  struct Half {
    uint32_t n = 0, launched = 0;  // segs [0, n) held since Reset; [launched, n) not started
    uint64_t max_len = 0;          // of those not started
    bool to_host = false;          // one of them lands in pinned host memory
    Status error;
  };
  Status MakeTables(cudaStream_t stream);
  // Frees `counters` (as they were allocated) and the pinned table.
  void FreeCounters(void* counters);

  gpu::CopySeg* segs_ = nullptr;         // pinned host: kSegs per half, then a done word per half
  unsigned* blocks_finished_ = nullptr;  // device memory, stream-ordered: one per half
  cudaStream_t alloc_stream_ = nullptr;  // where blocks_finished_ was allocated
  bool pooled_ = true;                   // blocks_finished_ from cudaMallocAsync, not cudaMalloc
  Half half_[DeviceCopier::kHalves];
};

}  // namespace kvlane::core
