#include "vmm_alloc.h"

#include <map>
#include <utility>
#include <vector>

#include "transport/cuda/cuda_check.h"
#include "transport/cuda/vmm.h"

namespace kvlane::test {
namespace {

using core::Driver;

struct Reservation {
  uint64_t total = 0;
  std::vector<std::pair<uint64_t, uint64_t>> parts;  // mapped (address, length)
};
std::map<uint64_t, Reservation>& Reservations() {  // test threads only, one at a time
  static std::map<uint64_t, Reservation> r;
  return r;
}

CUmemAllocationProp Prop(int device, unsigned handle_types) {
  CUmemAllocationProp p{};
  p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  p.location.id = device;
  p.requestedHandleTypes = static_cast<CUmemAllocationHandleType>(handle_types);
  return p;
}

std::string Err(CUresult r, const char* what) {
  return core::DriverStatus(r, what, __FILE__, __LINE__).ToString();
}

uint64_t Granularity(int device) {
  CUmemAllocationProp p = Prop(device, 0);
  size_t g = 0;
  if (Driver().granularity == nullptr ||
      Driver().granularity(&g, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS)
    return 0;
  return g;
}

}  // namespace

std::string VmmUnsupported(int device) {
  if (!Driver().vmm()) return "the CUDA driver lacks the VMM entry points";
  if (!core::DeviceSupports(device, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED))
    return "GPU " + std::to_string(device) + " does not support VMM (cuMemCreate)";
  if (!core::DeviceSupports(device,
                            CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED))
    return "GPU " + std::to_string(device) + " cannot export VMM memory as POSIX fds";
  return "";
}

uint64_t VmmPartBytes(int device, uint64_t bytes, int parts) {
  const uint64_t g = Granularity(device);
  if (g == 0) return 0;
  uint64_t part = (bytes + parts - 1) / parts;
  return (part + g - 1) / g * g;
}

void* VmmAlloc(int device, uint64_t bytes, int parts, unsigned handle_types, std::string* error) {
  const core::DriverApi& d = Driver();
  core::DeviceGuard guard(device);
  (void)cudaFree(nullptr);  // the primary context exists before the driver calls
  const uint64_t part = VmmPartBytes(device, bytes, parts);
  if (!d.vmm() || part == 0) return *error = "no VMM granularity", nullptr;
  Reservation res;
  res.total = part * parts;
  CUdeviceptr va = 0;
  CUresult rr = d.reserve(&va, res.total, Granularity(device), 0, 0);
  if (rr != CUDA_SUCCESS) return *error = Err(rr, "cuMemAddressReserve"), nullptr;
  CUmemAllocationProp p = Prop(device, handle_types);
  for (int i = 0; i < parts; ++i) {
    CUmemGenericAllocationHandle h = 0;
    CUresult r = d.create(&h, part, &p, 0);
    if (r == CUDA_SUCCESS) {
      r = d.map(va + i * part, part, 0, h, 0);
      (void)d.release(h);  // the mapping keeps the allocation
    }
    if (r != CUDA_SUCCESS) {
      *error = Err(r, "cuMemCreate/cuMemMap");
      Reservations()[va] = res;
      VmmFree(reinterpret_cast<void*>(va));
      return nullptr;
    }
    res.parts.emplace_back(va + i * part, part);
  }
  Reservations()[va] = res;
  CUmemAccessDesc a{};
  a.location = p.location;
  a.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  if (CUresult r = d.set_access(va, res.total, &a, 1); r != CUDA_SUCCESS) {
    *error = Err(r, "cuMemSetAccess");
    VmmFree(reinterpret_cast<void*>(va));
    return nullptr;
  }
  return reinterpret_cast<void*>(va);
}

void VmmFree(void* p) {
  auto it = Reservations().find(reinterpret_cast<uint64_t>(p));
  if (it == Reservations().end()) return;
  for (auto& [at, len] : it->second.parts) (void)Driver().unmap(at, len);
  (void)Driver().address_free(it->first, it->second.total);
  Reservations().erase(it);
}

}  // namespace kvlane::test
