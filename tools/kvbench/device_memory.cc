#include "device_memory.h"

#include "cuda_status.h"

namespace kvbench {

#ifdef KVBENCH_HAVE_CUDA
int DeviceCount() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

std::string DeviceName(int device) {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, device) != cudaSuccess)
    return "cuda:" + std::to_string(device);
  return prop.name;
}

uint64_t DeviceFreeBytes(int device) {
  size_t free = 0, total = 0;
  if (cudaSetDevice(device) != cudaSuccess || cudaMemGetInfo(&free, &total) != cudaSuccess) {
    return 0;
  }
  return free;
}

kvlane::Result<void*> DeviceAlloc(int device, uint64_t bytes) {
  KVLANE_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(device), "cudaSetDevice"));
  void* p = nullptr;
  KVLANE_RETURN_IF_ERROR(CudaStatus(cudaMalloc(&p, bytes), "cudaMalloc"));
  return p;
}

void DeviceFree(void* ptr) { (void)cudaFree(ptr); }

kvlane::Result<void*> PinnedAlloc(uint64_t bytes) {
  void* p = nullptr;
  KVLANE_RETURN_IF_ERROR(CudaStatus(cudaMallocHost(&p, bytes), "cudaMallocHost"));
  return p;
}

void PinnedFree(void* ptr) { (void)cudaFreeHost(ptr); }

// cudaMemcpy from pageable memory, and cudaMemset, may return before the device
// memory is written; kvlane copies on its own non-blocking streams, which do not
// wait for the legacy stream. So every writer here waits for the legacy stream
// (not the device: that would also wait for kvlane's resident proxy kernel).
static kvlane::Status LegacyStreamDone(kvlane::Status issued) {
  KVLANE_RETURN_IF_ERROR(issued);
  return CudaStatus(cudaStreamSynchronize(cudaStreamLegacy), "cudaStreamSynchronize");
}

kvlane::Status CopyToDevice(void* dst, const void* src, uint64_t len) {
  return LegacyStreamDone(CudaStatus(cudaMemcpy(dst, src, len, cudaMemcpyHostToDevice), "cudaMemcpy H2D"));
}

kvlane::Status CopyFromDevice(void* dst, const void* src, uint64_t len) {
  return CudaStatus(cudaMemcpy(dst, src, len, cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
}

kvlane::Status CopyDeviceToDevice(void* dst, const void* src, uint64_t len) {
  return LegacyStreamDone(CudaStatus(cudaMemcpy(dst, src, len, cudaMemcpyDeviceToDevice), "cudaMemcpy D2D"));
}

kvlane::Status DeviceMemset(void* dst, int byte, uint64_t len) {
  return LegacyStreamDone(CudaStatus(cudaMemset(dst, byte, len), "cudaMemset"));
}

#else  // !KVBENCH_HAVE_CUDA

int DeviceCount() { return 0; }
std::string DeviceName(int device) { return "cuda:" + std::to_string(device); }
uint64_t DeviceFreeBytes(int) { return 0; }
kvlane::Result<void*> DeviceAlloc(int, uint64_t) { return NoCuda(); }
void DeviceFree(void*) {}
kvlane::Result<void*> PinnedAlloc(uint64_t) { return NoCuda(); }
void PinnedFree(void*) {}
kvlane::Status CopyToDevice(void*, const void*, uint64_t) { return NoCuda(); }
kvlane::Status CopyFromDevice(void*, const void*, uint64_t) { return NoCuda(); }
kvlane::Status CopyDeviceToDevice(void*, const void*, uint64_t) { return NoCuda(); }
kvlane::Status DeviceMemset(void*, int, uint64_t) { return NoCuda(); }

#endif

}  // namespace kvbench
