// The device BufferSpace: CUDA device memory, filled and checked through host
// staging copies. Built only with the CUDA toolkit (KVLANE_HAVE_CUDA).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <string>
#include <vector>

#include "buffers.h"

namespace lanebench {
namespace {

kvlane::Status CudaStatus(const char* what, cudaError_t e) {
  if (e == cudaSuccess) return kvlane::Status::Ok();
  return kvlane::Status::Backend(std::string(what) + ": " + cudaGetErrorString(e));
}

class DeviceSpace final : public BufferSpace {
 public:
  explicit DeviceSpace(int device) : device_(device) {}
  ~DeviceSpace() override {
    cudaSetDevice(device_);
    for (void* p : blocks_) cudaFree(p);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  kvlane::MemoryKind kind() const override { return kvlane::MemoryKind::kCuda; }
  int32_t device() const override { return device_; }

  kvlane::Result<uint8_t*> Allocate(uint64_t bytes) override {
    KVLANE_RETURN_IF_ERROR(CudaStatus("cudaSetDevice", cudaSetDevice(device_)));
    void* p = nullptr;
    KVLANE_RETURN_IF_ERROR(CudaStatus("cudaMalloc", cudaMalloc(&p, bytes)));
    blocks_.push_back(p);
    KVLANE_RETURN_IF_ERROR(Stream());
    KVLANE_RETURN_IF_ERROR(CudaStatus("cudaMemsetAsync", cudaMemsetAsync(p, 0, bytes, stream_)));
    KVLANE_RETURN_IF_ERROR(CudaStatus("cudaStreamSynchronize", cudaStreamSynchronize(stream_)));
    return static_cast<uint8_t*>(p);
  }
  // The bytes must be in device memory before the source posts (the engine
  // copies on its own streams): the copy is synchronized on a stream of our
  // own. Not a device-wide sync, which would also wait for the engine's
  // resident proxy kernel to be renewed (up to 2 ms).
  kvlane::Status Upload(uint8_t* dst, const uint8_t* host, uint64_t n) override {
    KVLANE_RETURN_IF_ERROR(Stream());
    KVLANE_RETURN_IF_ERROR(CudaStatus(
        "cudaMemcpyAsync(H2D)", cudaMemcpyAsync(dst, host, n, cudaMemcpyHostToDevice, stream_)));
    return CudaStatus("cudaStreamSynchronize", cudaStreamSynchronize(stream_));
  }
  kvlane::Status Download(uint8_t* host, const uint8_t* src, uint64_t n) override {
    return CudaStatus("cudaMemcpy(D2H)", cudaMemcpy(host, src, n, cudaMemcpyDeviceToHost));
  }

 private:
  kvlane::Status Stream() {
    if (stream_ != nullptr) return kvlane::Status::Ok();
    return CudaStatus("cudaStreamCreateWithFlags",
                      cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }

  const int device_;
  std::vector<void*> blocks_;
  cudaStream_t stream_ = nullptr;  // non-blocking: never waits for the engine's streams
};

}  // namespace

kvlane::Result<std::unique_ptr<BufferSpace>> MakeDeviceSpace(int role) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    (void)cudaGetLastError();
    return kvlane::Status::NotSupported("no CUDA device is visible");
  }
  // The source on GPU 0, every target on GPU 1 (or GPU 0 when there is one).
  int device = role == 0 ? 0 : std::min(1, count - 1);
  KVLANE_RETURN_IF_ERROR(CudaStatus("cudaSetDevice", cudaSetDevice(device)));
  return std::unique_ptr<BufferSpace>(new DeviceSpace(device));
}

}  // namespace lanebench
