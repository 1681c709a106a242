// Driver(): the driver API entry points the cuda transport uses, looked up once
// through cudart (cudaGetDriverEntryPointByVersion), so nothing links libcuda.
#include <string>

#include "transport/cuda/cuda_check.h"

namespace kvlane::core {
namespace {

// Entry points of the CUDA 12.0 ABI (every one used here exists since 10.2).
constexpr unsigned kAbiVersion = 12000;

template <typename Fn>
void Load(const char* symbol, Fn* out) {
  cudaDriverEntryPointQueryResult q{};
  void* fn = nullptr;
  if (cudaGetDriverEntryPointByVersion(symbol, &fn, kAbiVersion, cudaEnableDefault, &q) ==
          cudaSuccess &&
      q == cudaDriverEntryPointSuccess)
    *out = reinterpret_cast<Fn>(fn);
}

DriverApi LoadAll() {
  DriverApi a;
  Load("cuStreamWriteValue64", &a.write_value64);
  Load("cuMemGetAddressRange", &a.address_range);
  Load("cuGetErrorName", &a.error_name);
  Load("cuPointerGetAttribute", &a.pointer_attribute);
  Load("cuDeviceGet", &a.device_get);
  Load("cuDeviceGetAttribute", &a.device_attribute);
  Load("cuMemRetainAllocationHandle", &a.retain_handle);
  Load("cuMemRelease", &a.release);
  Load("cuMemGetAllocationPropertiesFromHandle", &a.handle_props);
  Load("cuMemGetAllocationGranularity", &a.granularity);
  Load("cuMemExportToShareableHandle", &a.export_handle);
  Load("cuMemImportFromShareableHandle", &a.import_handle);
  Load("cuMemCreate", &a.create);
  Load("cuMemAddressReserve", &a.reserve);
  Load("cuMemAddressFree", &a.address_free);
  Load("cuMemMap", &a.map);
  Load("cuMemUnmap", &a.unmap);
  Load("cuMemSetAccess", &a.set_access);
  (void)cudaGetLastError();
  return a;
}

}  // namespace

const DriverApi& Driver() {
  static const DriverApi api = LoadAll();
  return api;
}

Status DriverStatus(CUresult err, const char* what, const char* file, int line) {
  const char* name = nullptr;
  if (Driver().error_name == nullptr || Driver().error_name(err, &name) != CUDA_SUCCESS ||
      name == nullptr)
    name = "CUDA_ERROR_?";
  std::string m = std::string(what) + ": " + name + " (" + std::to_string(static_cast<int>(err)) +
                  ") at " + file + ":" + std::to_string(line);
  return err == CUDA_ERROR_NOT_SUPPORTED ? Status::NotSupported(std::move(m))
                                         : Status::Backend(std::move(m));
}

}  // namespace kvlane::core
