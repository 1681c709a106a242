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
  }
  kvlane::MemoryKind kind() const override { return kvlane::MemoryKind::kCuda; }
  int32_t device() const override { return device_; }

  kvlane::Result<uint8_t*> Allocate(uint64_t bytes) override {
    KVLANE_RETURN_IF_ERROR(CudaStatus("cudaSetDevice", cudaSetDevice(device_)));
    void* p = nullptr;
    KVLANE_RETURN_IF_ERROR(CudaStatus("cudaMalloc", cudaMalloc(&p, bytes)));
    blocks_.push_back(p);
    KVLANE_RETURN_IF_ERROR(CudaStatus("cudaMemset", cudaMemset(p, 0, bytes)));
    KVLANE_RETURN_IF_ERROR(CudaStatus("cudaDeviceSynchronize", cudaDeviceSynchronize()));
    return static_cast<uint8_t*>(p);
  }
  // cudaMemcpy from pageable memory may return before the DMA into the device
  // finished; the engine copies on its own streams, so wait for it here.
  kvlane::Status Upload(uint8_t* dst, const uint8_t* host, uint64_t n) override {
    KVLANE_RETURN_IF_ERROR(
        CudaStatus("cudaMemcpy(H2D)", cudaMemcpy(dst, host, n, cudaMemcpyHostToDevice)));
    return CudaStatus("cudaDeviceSynchronize", cudaDeviceSynchronize());
  }
  kvlane::Status Download(uint8_t* host, const uint8_t* src, uint64_t n) override {
    return CudaStatus("cudaMemcpy(D2H)", cudaMemcpy(host, src, n, cudaMemcpyDeviceToHost));
  }

 private:
  const int device_;
  std::vector<void*> blocks_;
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
