#include "transport/cuda/staging_batch.h"

#include <algorithm>

#include "transport/cuda/cuda_check.h"

namespace kvlane::core {

CeBatch::~CeBatch() {
  for (Half& b : half_)
    if (b.scratch != nullptr) (void)cudaFreeAsync(b.scratch, b.scratch_stream);
  (void)cudaGetLastError();
}

void CeBatch::Add(int h, const gpu::CopySeg& s, bool to_host) {
  Half& b = half_[h];
  (to_host ? b.to_host : b.to_device).push_back(s);
  if (!to_host && s.len < kInlineBelow) b.short_to_device = true;
}

Status CeBatch::Copy(Half& b, const std::vector<gpu::CopySeg>& segs, int64_t src_shift,
                     cudaStream_t stream) {
  if (segs.empty()) return Status::Ok();
  const size_t first = b.sizes.size();
  for (const gpu::CopySeg& s : segs) {
    b.dsts.push_back(reinterpret_cast<void*>(s.dst));
    b.srcs.push_back(reinterpret_cast<const void*>(s.src + src_shift));
    b.sizes.push_back(s.len);
  }
  const size_t n = segs.size();
  if (n > 1 && !batch_refused_) {
    cudaMemcpyAttributes attr{};
    attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;  // the half is written before, in order
    size_t attr_at = 0;
    const cudaError_t err =
        cudaMemcpyBatchAsync(b.dsts.data() + first, b.srcs.data() + first, b.sizes.data() + first,
                             n, &attr, &attr_at, 1, stream);
    if (err == cudaSuccess) return Status::Ok();
    (void)cudaGetLastError();
    // An older driver (or a refusal of the whole batch, which queues nothing):
    // one call per copy from now on, whose errors name the culprit.
    batch_refused_ = true;
  }
  for (size_t i = first; i < first + n; ++i) {
    const cudaError_t err =
        cudaMemcpyAsync(b.dsts[i], b.srcs[i], b.sizes[i], cudaMemcpyDefault, stream);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      return CudaStatus(err, "cudaMemcpyAsync (staging)", __FILE__, __LINE__);
    }
  }
  return Status::Ok();
}

Status CeBatch::Issue(int h, const uint8_t* half, cudaStream_t stream) {
  Half& b = half_[h];
  Status s = Copy(b, b.to_host, 0, stream);
  if (s.ok() && b.short_to_device) {
    // The window's bytes into scratch at their offsets in the half, in one
    // copy, then from there: device to device.
    if (b.scratch == nullptr) {
      void* p = nullptr;
      KVLANE_CUDA(cudaMallocAsync(&p, half_bytes_, stream));
      b.scratch = static_cast<uint8_t*>(p);
      b.scratch_stream = stream;
    }
    const auto base = reinterpret_cast<uint64_t>(half);
    uint64_t lo = half_bytes_, hi = 0;
    for (const gpu::CopySeg& c : b.to_device)
      lo = std::min(lo, c.src - base), hi = std::max(hi, c.src - base + c.len);
    KVLANE_CUDA(
        cudaMemcpyAsync(b.scratch + lo, half + lo, hi - lo, cudaMemcpyHostToDevice, stream));
    s = Copy(b, b.to_device, static_cast<int64_t>(reinterpret_cast<uint64_t>(b.scratch) - base),
             stream);
  } else if (s.ok()) {
    s = Copy(b, b.to_device, 0, stream);
  }
  b.to_host.clear();
  b.to_device.clear();
  b.short_to_device = false;
  return s;
}

void CeBatch::Reset(int h) {
  Half& b = half_[h];
  b.dsts.clear();
  b.srcs.clear();
  b.sizes.clear();
}

}  // namespace kvlane::core
