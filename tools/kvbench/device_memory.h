// Device memory for kvbench's pools: thin wrappers over the CUDA runtime that
// return Status. Built without CUDA they report zero devices and NotSupported.
// Thread-safe (the CUDA runtime is); every copy here is synchronous.
#pragma once

#include <cstdint>
#include <string>

#include "kvlane/status.h"

namespace kvbench {

// Visible CUDA devices; 0 without CUDA, a driver or a GPU.
int DeviceCount();
// "NVIDIA H200" or "cuda:N" when unknown.
std::string DeviceName(int device);

// Free memory of `device` (cudaMemGetInfo) in bytes; 0 when unknown.
uint64_t DeviceFreeBytes(int device);

kvlane::Result<void*> DeviceAlloc(int device, uint64_t bytes);
void DeviceFree(void* ptr);
// Page-locked host memory (cudaMallocHost): a cudaMemcpy to or from it is
// synchronous with the host. Freed with PinnedFree.
kvlane::Result<void*> PinnedAlloc(uint64_t bytes);
void PinnedFree(void* ptr);
kvlane::Status CopyToDevice(void* dst, const void* src, uint64_t len);
kvlane::Status CopyFromDevice(void* dst, const void* src, uint64_t len);
kvlane::Status CopyDeviceToDevice(void* dst, const void* src, uint64_t len);
kvlane::Status DeviceMemset(void* dst, int byte, uint64_t len);

}  // namespace kvbench
