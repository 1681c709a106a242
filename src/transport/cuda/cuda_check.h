// The one wrapper for CUDA runtime calls: a failure becomes a Backend status
// with the call, the error name and the place.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "kvlane/status.h"

namespace kvlane::core {

inline Status CudaStatus(cudaError_t err, const char* what, const char* file, int line) {
  return Status::Backend(std::string(what) + ": " + cudaGetErrorName(err) + " (" +
                         cudaGetErrorString(err) + ") at " + file + ":" + std::to_string(line));
}

// Makes `device` current on this thread for its lifetime, then restores the
// caller's device (user threads keep the device they chose).
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    if (cudaGetDevice(&saved_) != cudaSuccess) saved_ = -1;
    if (saved_ != device) (void)cudaSetDevice(device);
  }
  ~DeviceGuard() {
    int now = -1;
    if (saved_ >= 0 && cudaGetDevice(&now) == cudaSuccess && now != saved_) (void)cudaSetDevice(saved_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int saved_ = -1;
};

// Driver entry points loaded at run time through cudart (no link against
// libcuda): null when the driver does not provide them.
struct DriverApi {
  // cuStreamWriteValue64(stream, address, value, flags)
  int (*write_value64)(cudaStream_t, unsigned long long, unsigned long long, unsigned) = nullptr;
  // cuMemGetAddressRange(&base, &size, ptr)
  int (*address_range)(unsigned long long*, size_t*, unsigned long long) = nullptr;
};
const DriverApi& Driver();

}  // namespace kvlane::core

// Runs a CUDA runtime call; returns a Backend status from the enclosing function on failure.
#define KVLANE_CUDA(call)                                                               \
  do {                                                                                  \
    cudaError_t kvlane_err_ = (call);                                                   \
    if (kvlane_err_ != cudaSuccess)                                                     \
      return ::kvlane::core::CudaStatus(kvlane_err_, #call, __FILE__, __LINE__);        \
  } while (0)
