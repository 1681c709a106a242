#include "device_check.h"

#include "cuda_status.h"

#ifdef KVBENCH_HAVE_CUDA
#include "gpu/pattern_launch.h"
#endif

namespace kvbench {

#ifdef KVBENCH_HAVE_CUDA
namespace {

// The stream the kernels run on and one device buffer holding the totals, then
// the table. Stream-ordered allocation where the device supports it: a plain
// cudaFree waits for the whole device, including the engine's resident kernels.
class Launch {
 public:
  Launch() = default;
  Launch(const Launch&) = delete;
  Launch& operator=(const Launch&) = delete;
  ~Launch() {
    if (buffer_ != nullptr && pooled_) (void)cudaFreeAsync(buffer_, stream_);
    if (stream_ != nullptr) (void)cudaStreamSynchronize(stream_);
    if (buffer_ != nullptr && !pooled_) (void)cudaFree(buffer_);
    if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
  }

  kvlane::Status Upload(int device, const PatternTable& table) {
    KVLANE_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(device), "cudaSetDevice"));
    KVLANE_RETURN_IF_ERROR(
        CudaStatus(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate"));
    uint64_t bytes = sizeof(gpu::VerifyTotals) + table.size() * sizeof(gpu::PatternExtent);
    pooled_ = cudaMallocAsync(&buffer_, bytes, stream_) == cudaSuccess;
    if (!pooled_) {
      (void)cudaGetLastError();  // clear the failed cudaMallocAsync
      KVLANE_RETURN_IF_ERROR(CudaStatus(cudaMalloc(&buffer_, bytes), "cudaMalloc (pattern table)"));
    }
    return CudaStatus(
        cudaMemcpyAsync(this->table(), table.data(), bytes - sizeof(gpu::VerifyTotals),
                        cudaMemcpyHostToDevice, stream_),
        "cudaMemcpyAsync (pattern table)");
  }

  kvlane::Status Wait(cudaError_t launched, const char* what) {
    KVLANE_RETURN_IF_ERROR(CudaStatus(launched, what));
    return CudaStatus(cudaStreamSynchronize(stream_), what);
  }

  cudaStream_t stream() const { return stream_; }
  gpu::VerifyTotals* totals() const { return static_cast<gpu::VerifyTotals*>(buffer_); }
  gpu::PatternExtent* table() const { return reinterpret_cast<gpu::PatternExtent*>(totals() + 1); }

 private:
  cudaStream_t stream_ = nullptr;
  void* buffer_ = nullptr;
  bool pooled_ = false;
};

}  // namespace

kvlane::Status DeviceFill(int device, const PatternTable& table, uint32_t rank, uint64_t epoch) {
  if (table.empty()) return kvlane::Status::Ok();
  Launch l;
  KVLANE_RETURN_IF_ERROR(l.Upload(device, table));
  return l.Wait(gpu::LaunchFillPattern(l.table(), table.size(), rank, epoch, l.stream()),
                "pattern fill kernel");
}

kvlane::Status DeviceWipe(int device, const PatternTable& table, uint8_t byte) {
  if (table.empty()) return kvlane::Status::Ok();
  Launch l;
  KVLANE_RETURN_IF_ERROR(l.Upload(device, table));
  return l.Wait(gpu::LaunchWipe(l.table(), table.size(), byte, l.stream()), "wipe kernel");
}

kvlane::Result<gpu::VerifyTotals> DeviceVerify(int device, const PatternTable& table, uint32_t rank,
                                               uint64_t epoch) {
  gpu::VerifyTotals totals{0, gpu::kNoMismatch};
  if (table.empty()) return totals;
  Launch l;
  KVLANE_RETURN_IF_ERROR(l.Upload(device, table));
  KVLANE_RETURN_IF_ERROR(
      l.Wait(gpu::LaunchVerifyPattern(l.table(), table.size(), rank, epoch, l.totals(), l.stream()),
             "verify kernel"));
  KVLANE_RETURN_IF_ERROR(l.Wait(
      cudaMemcpyAsync(&totals, l.totals(), sizeof(totals), cudaMemcpyDeviceToHost, l.stream()),
      "cudaMemcpyAsync (verify totals)"));
  return totals;
}

#else  // !KVBENCH_HAVE_CUDA

kvlane::Status DeviceFill(int, const PatternTable&, uint32_t, uint64_t) { return NoCuda(); }
kvlane::Status DeviceWipe(int, const PatternTable&, uint8_t) { return NoCuda(); }
kvlane::Result<gpu::VerifyTotals> DeviceVerify(int, const PatternTable&, uint32_t, uint64_t) {
  return NoCuda();
}

#endif

}  // namespace kvbench
