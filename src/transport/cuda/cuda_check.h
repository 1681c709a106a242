// The one wrapper for CUDA runtime calls: a failure becomes a Backend status
// with the call, the error name and the place.
#pragma once

#include <cuda.h>  // driver API types only: the calls go through Driver()
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
  // cuMemGetAddressRange(&base, &size, ptr): for a VMM pointer, the one cuMemMap mapping holding it
  int (*address_range)(unsigned long long*, size_t*, unsigned long long) = nullptr;

  // Virtual memory management, for VMM exports and imports (named after the driver calls).
  using Handle = CUmemGenericAllocationHandle;
  CUresult (*error_name)(CUresult, const char**) = nullptr;
  CUresult (*pointer_attribute)(void*, CUpointer_attribute, CUdeviceptr) = nullptr;
  CUresult (*device_get)(CUdevice*, int) = nullptr;
  CUresult (*device_attribute)(int*, CUdevice_attribute, CUdevice) = nullptr;
  CUresult (*retain_handle)(Handle*, void*) = nullptr;  // cuMemRetainAllocationHandle
  CUresult (*release)(Handle) = nullptr;                // cuMemRelease
  // cuMemGetAllocationPropertiesFromHandle, cuMemGetAllocationGranularity
  CUresult (*handle_props)(CUmemAllocationProp*, Handle) = nullptr;
  CUresult (*granularity)(size_t*, const CUmemAllocationProp*,
                          CUmemAllocationGranularity_flags) = nullptr;
  // cuMemExportToShareableHandle, cuMemImportFromShareableHandle
  CUresult (*export_handle)(void*, Handle, CUmemAllocationHandleType, unsigned long long) = nullptr;
  CUresult (*import_handle)(Handle*, void*, CUmemAllocationHandleType) = nullptr;
  // cuMemCreate, cuMemAddressReserve, cuMemAddressFree, cuMemMap, cuMemUnmap, cuMemSetAccess
  CUresult (*create)(Handle*, size_t, const CUmemAllocationProp*, unsigned long long) = nullptr;
  CUresult (*reserve)(CUdeviceptr*, size_t, size_t, CUdeviceptr, unsigned long long) = nullptr;
  CUresult (*address_free)(CUdeviceptr, size_t) = nullptr;
  CUresult (*map)(CUdeviceptr, size_t, size_t, Handle, unsigned long long) = nullptr;
  CUresult (*unmap)(CUdeviceptr, size_t) = nullptr;
  CUresult (*set_access)(CUdeviceptr, size_t, const CUmemAccessDesc*, size_t) = nullptr;

  // Every cuMem* entry point above was found.
  bool vmm() const {
    return address_range && error_name && pointer_attribute && device_get && device_attribute &&
           retain_handle && release && handle_props && granularity && export_handle &&
           import_handle && create && reserve && address_free && map && unmap && set_access;
  }
};
const DriverApi& Driver();

// A driver API failure as a Backend status (NotSupported for CUDA_ERROR_NOT_SUPPORTED).
Status DriverStatus(CUresult err, const char* what, const char* file, int line);

}  // namespace kvlane::core

// Runs a CUDA runtime call; returns a Backend status from the enclosing function on failure.
#define KVLANE_CUDA(call)                                                               \
  do {                                                                                  \
    cudaError_t kvlane_err_ = (call);                                                   \
    if (kvlane_err_ != cudaSuccess)                                                     \
      return ::kvlane::core::CudaStatus(kvlane_err_, #call, __FILE__, __LINE__);        \
  } while (0)

// Runs a driver API call (through Driver()); returns a status from the enclosing function on failure.
#define KVLANE_CU(call)                                                                 \
  do {                                                                                  \
    CUresult kvlane_cu_ = (call);                                                       \
    if (kvlane_cu_ != CUDA_SUCCESS)                                                     \
      return ::kvlane::core::DriverStatus(kvlane_cu_, #call, __FILE__, __LINE__);       \
  } while (0)
