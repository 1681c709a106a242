// Exporter side of VMM sharing: describing the allocations under a piece and
// handing out POSIX fds for them.
#include <fcntl.h>
#include <unistd.h>

#include <cstring>

#include "transport/cuda/vmm.h"

namespace kvlane::core {
namespace {

bool Requested(const CUmemAllocationProp& p, CUmemAllocationHandleType t) {
  return (static_cast<unsigned>(p.requestedHandleTypes) & static_cast<unsigned>(t)) != 0;
}

// The allocation mapped at [base, base + len): its handle types, fabric handle
// first (when the device can), a probe of the POSIX fd export second.
Result<CudaVmmAlloc> DescribeAlloc(int device, uint64_t base, uint64_t len) {
  const DriverApi& d = Driver();
  CUmemGenericAllocationHandle raw = 0;
  CUresult r = d.retain_handle(&raw, reinterpret_cast<void*>(base));
  if (r != CUDA_SUCCESS)
    return Status::NotSupported(
        "device memory is neither legacy-IPC capable nor VMM-mapped (" +
        DriverStatus(r, "cuMemRetainAllocationHandle", __FILE__, __LINE__).message() + ")");
  VmmHandle h(raw);
  CUmemAllocationProp prop{};
  KVLANE_CU(d.handle_props(&prop, h.get()));
  CudaVmmAlloc a;
  a.base = base;
  a.len = len;
  if (Requested(prop, CU_MEM_HANDLE_TYPE_FABRIC) &&
      DeviceSupports(device, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED)) {
    CUmemFabricHandle fh{};
    static_assert(sizeof(fh.data) == sizeof(a.fabric));
    if (d.export_handle(&fh, h.get(), CU_MEM_HANDLE_TYPE_FABRIC, 0) ==
        CUDA_SUCCESS) {  // fails without IMEX
      std::memcpy(a.fabric.data(), fh.data, sizeof(fh.data));
      a.handles |= kVmmFabric;
    }
  }
  if (Requested(prop, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)) {
    int fd = -1;
    KVLANE_CU(d.export_handle(&fd, h.get(), CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    ::close(fd);  // a probe: fds are made per request (ExportVmmFd)
    a.handles |= kVmmPosixFd;
  }
  if (a.handles == 0) return Status::NotSupported(kVmmNotExportable);
  return a;
}

}  // namespace

bool DeviceSupports(int device, CUdevice_attribute attr) {
  const DriverApi& d = Driver();
  CUdevice dev = 0;
  int v = 0;
  return d.vmm() && d.device_get(&dev, device) == CUDA_SUCCESS &&
         d.device_attribute(&v, attr, dev) == CUDA_SUCCESS && v != 0;
}

Status ExportVmm(CudaExport* e) {
  const DriverApi& d = Driver();
  if (!d.vmm()) return Status::NotSupported("the CUDA driver lacks the VMM entry points");
  DeviceGuard guard(e->device);
  std::vector<CudaVmmAlloc> allocs;
  const uint64_t end = e->piece_base + e->piece_len;
  uint64_t at = e->piece_base;
  while (at < end) {  // one mapping (one allocation) at a time
    if (allocs.size() == kMaxVmmAllocs)
      return Status::NotSupported("piece spans too many VMM allocations");
    unsigned long long base = 0;
    size_t size = 0;
    if (d.address_range(&base, &size, at) != CUDA_SUCCESS || size == 0 || base > at ||
        at - base >= size || base + size < base)
      return Status::Backend("cuMemGetAddressRange failed inside a device piece");
    KVLANE_ASSIGN_OR_RETURN(CudaVmmAlloc a, DescribeAlloc(e->device, base, size));
    allocs.push_back(a);
    at = base + size;
  }
  e->kind = ExportKind::kVmm;
  e->alloc_base = allocs.front().base;
  e->alloc_len = at - e->alloc_base;
  e->allocs = std::move(allocs);
  return Status::Ok();
}

Result<Fd> ExportVmmFd(int device, uint64_t base) {
  const DriverApi& d = Driver();
  if (!d.vmm()) return Status::NotSupported("the CUDA driver lacks the VMM entry points");
  DeviceGuard guard(device);
  CUmemGenericAllocationHandle raw = 0;
  KVLANE_CU(d.retain_handle(&raw, reinterpret_cast<void*>(base)));
  VmmHandle h(raw);
  int fd = -1;
  KVLANE_CU(d.export_handle(&fd, h.get(), CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
  Fd owned(fd);
  (void)::fcntl(fd, F_SETFD, FD_CLOEXEC);
  return owned;
}

}  // namespace kvlane::core
