#include "transport/cuda/staging_kernel.h"

#include <algorithm>

#include "gpu/copy_launch.h"
#include "transport/cuda/cuda_check.h"

namespace kvlane::core {
namespace {

constexpr uint64_t kUnit = 16u << 10;  // a block per 16 KiB of a range
constexpr int kMaxBlocks = 1024;

}  // namespace

KernelBatch::~KernelBatch() { FreeCounters(blocks_finished_); }

void KernelBatch::FreeCounters(void* counters) {
  if (counters != nullptr)
    (void)(pooled_ ? cudaFreeAsync(counters, alloc_stream_) : cudaFree(counters));
  if (segs_ != nullptr) (void)cudaFreeHost(segs_);
  segs_ = nullptr;
  blocks_finished_ = nullptr;
  (void)cudaGetLastError();
}

// The counters come from the stream-ordered allocator: cudaFree would wait for
// the whole device (a resident proxy's launch included), cudaFreeAsync does not.
// A device without memory pools gets cudaMalloc (and pays that wait once, when
// the copier goes).
Status KernelBatch::MakeTables(cudaStream_t stream) {
  if (segs_ != nullptr) return Status::Ok();
  void* segs = nullptr;
  KVLANE_CUDA(cudaHostAlloc(&segs, (sizeof(gpu::CopySeg) * kSegs + 8) * DeviceCopier::kHalves,
                            cudaHostAllocPortable | cudaHostAllocMapped));
  segs_ = static_cast<gpu::CopySeg*>(segs);
  alloc_stream_ = stream;
  void* counters = nullptr;
  const size_t n = sizeof(unsigned) * DeviceCopier::kHalves;
  pooled_ = true;
  cudaError_t err = cudaMallocAsync(&counters, n, stream);
  if (err == cudaErrorNotSupported) {
    (void)cudaGetLastError();
    pooled_ = false;
    err = cudaMalloc(&counters, n);
  }
  if (err == cudaSuccess) err = cudaMemsetAsync(counters, 0, n, stream);
  if (err == cudaSuccess) err = cudaStreamSynchronize(stream);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    FreeCounters(counters);
    return CudaStatus(err, "staging kernel tables", __FILE__, __LINE__);
  }
  blocks_finished_ = static_cast<unsigned*>(counters);
  return Status::Ok();
}

Status KernelBatch::Hold(int h, const gpu::CopySeg& s, bool to_host, cudaStream_t stream) {
  KVLANE_RETURN_IF_ERROR(MakeTables(stream));
  Half& b = half_[h];
  if (b.n == kSegs) {  // full: start it, wait, and reuse the table
    KVLANE_RETURN_IF_ERROR(Launch(h, stream));
    KVLANE_CUDA(cudaStreamSynchronize(stream));
    b.n = b.launched = 0;
  }
  segs_[kSegs * h + b.n++] = s;
  b.max_len = std::max<uint64_t>(b.max_len, s.len);
  b.to_host = b.to_host || to_host;
  return Status::Ok();
}

Status KernelBatch::Launch(int h, cudaStream_t stream) {
  Half& b = half_[h];
  if (b.launched == b.n) return Status::Ok();
  const uint32_t begin = b.launched;
  b.launched = b.n;
  const auto parts = static_cast<uint32_t>(std::max<uint64_t>(1, (b.max_len + kUnit - 1) / kUnit));
  const int blocks =
      static_cast<int>(std::min<uint64_t>(uint64_t{b.n - begin} * parts, kMaxBlocks));
  auto* words = reinterpret_cast<uint64_t*>(segs_ + kSegs * DeviceCopier::kHalves);
  const gpu::CopyDone done{blocks_finished_ + h, words + h, 1, nullptr, 0};
  // A batch landing in device memory only: the device-scope fence suffices
  // (copy_launch.h); the caller's stream synchronization orders it for the host.
  const cudaError_t err = gpu::LaunchCopySegments(
      segs_ + kSegs * h, begin, b.n, parts, blocks, done,
      b.to_host ? gpu::BlockFence::kSystem : gpu::BlockFence::kDevice, stream);
  b.max_len = 0;
  b.to_host = false;
  if (err == cudaSuccess) return Status::Ok();
  (void)cudaGetLastError();
  Status s = CudaStatus(err, "staging copy kernel", __FILE__, __LINE__);
  if (b.error.ok()) b.error = s;
  return s;
}

Status KernelBatch::Reset(int h) {
  Status error = std::move(half_[h].error);
  half_[h] = Half{};
  return error;
}

}  // namespace kvlane::core
