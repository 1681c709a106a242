#include "transport/cuda/staging_batch.h"

#include "transport/cuda/cuda_check.h"

namespace kvlane::core {

void CeBatch::Add(int h, const gpu::CopySeg& s) {
  Half& b = half_[h];
  b.dsts.push_back(reinterpret_cast<void*>(s.dst));
  b.srcs.push_back(reinterpret_cast<const void*>(s.src));
  b.sizes.push_back(s.len);
}

Status CeBatch::Issue(int h, cudaStream_t stream) {
  Half& b = half_[h];
  const size_t first = b.issued, n = b.sizes.size() - first;
  b.issued = b.sizes.size();
  if (n == 0) return Status::Ok();
#if CUDART_VERSION >= 13000  // the call's CUDA 13 form (12.8 had another; older, none)
  if (n > 1 && !batch_refused_) {
    cudaMemcpyAttributes attr{};
    attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;  // written before, in stream order
    size_t attr_at = 0;
    const cudaError_t err =
        cudaMemcpyBatchAsync(b.dsts.data() + first, b.srcs.data() + first, b.sizes.data() + first,
                             n, &attr, &attr_at, 1, stream);
    if (err == cudaSuccess) return Status::Ok();
    (void)cudaGetLastError();
    // A refused batch queues nothing: its copies go one call each below, whose
    // errors name the culprit. A driver without the call: so from now on.
    if (err == cudaErrorNotSupported || err == cudaErrorCallRequiresNewerDriver)
      batch_refused_ = true;
  }
#endif
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

void CeBatch::Reset(int h) {
  Half& b = half_[h];
  b.dsts.clear();
  b.srcs.clear();
  b.sizes.clear();
  b.issued = 0;
}

}  // namespace kvlane::core
