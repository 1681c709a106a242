// StagingCopy::kBatch's half of the cuda copier (cuda_copier.cc): a window's
// device ranges go to the copy engines with one cudaMemcpyBatchAsync; short
// ranges into device memory through device scratch.
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
  // Copies into device memory shorter than this are carried inside the
  // driver's command stream at CPU speed (~5 GB/s measured: a 1 MiB window of
  // 22,528-byte ranges took 190 us in one batch against 40 us from device
  // scratch), so such windows go host -> scratch in one copy, then scratch ->
  // destinations device to device.
  static constexpr size_t kInlineBelow = 32u << 10;

  explicit CeBatch(size_t half_bytes) : half_bytes_(half_bytes) {}
  // REQUIRES: every copy issued finished (the streams were synchronized).
  ~CeBatch();
  CeBatch(const CeBatch&) = delete;
  CeBatch& operator=(const CeBatch&) = delete;

  // Queues `s` for half h. to_host: s.dst lies in that half; else s.src does.
  void Add(int h, const gpu::CopySeg& s, bool to_host);
  // Issues half h's queued copies on `stream`; `half` is the half's host
  // buffer (the sources of the copies into device memory lie in it).
  Status Issue(int h, const uint8_t* half, cudaStream_t stream);
  // After `stream` of half h was synchronized: forgets what was issued.
  void Reset(int h);

 private:
  struct Half {
    std::vector<void*> dsts;  // copies of one batch call (kept until Reset)
    std::vector<const void*> srcs;
    std::vector<size_t> sizes;
    std::vector<gpu::CopySeg> to_host, to_device;  // queued, not issued
    bool short_to_device = false;                  // to_device holds a copy under kInlineBelow
    uint8_t* scratch = nullptr;                    // device memory, half_bytes_, stream-ordered
    cudaStream_t scratch_stream = nullptr;
  };
  // One batch call for `segs`, offset by `src_shift` bytes on the source side
  // (one call per copy where the driver refuses batches).
  Status Copy(Half& b, const std::vector<gpu::CopySeg>& segs, int64_t src_shift,
              cudaStream_t stream);

  const size_t half_bytes_;
  bool batch_refused_ = false;  // the driver has no batch call: one call per copy
  Half half_[DeviceCopier::kHalves];
};

}  // namespace kvlane::core
