// Sharing VMM memory (cuMemCreate + cuMemMap) between processes of one host,
// where legacy CUDA IPC does not work. Export: a registered piece may lie on
// several allocations mapped back to back; each is described on its own with
// the shareable handle types it was created with (CUmemAllocationProp::
// requestedHandleTypes): a fabric handle travels in the metadata, a POSIX fd is
// handed out on request over the control socket (ExportVmmFd, SCM_RIGHTS).
// Import: the allocations are imported, mapped back to back into one reserved
// range and opened read/write to the importing GPU (VmmMapping).
// All driver calls go through Driver(); every function needs Driver().vmm().
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "transport/cuda/cuda_blob.h"
#include "transport/cuda/cuda_check.h"
#include "transport/stream/socket.h"

namespace kvlane::core {

// The message of an allocation created without an exportable handle type.
inline constexpr const char* kVmmNotExportable =
    "VMM allocation not exportable: create it with CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR "
    "(CUmemAllocationProp::requestedHandleTypes)";

// True when `device` reports `attr` (a CU_DEVICE_ATTRIBUTE_*_SUPPORTED) as set.
bool DeviceSupports(int device, CUdevice_attribute attr);

// Fills kind (kVmm), alloc_base, alloc_len and allocs of `e` from the piece
// [e->piece_base, +piece_len) on GPU e->device. NotSupported with the reason
// when the piece is not VMM memory or an allocation under it offers no handle
// type this host can share (kVmmNotExportable).
Status ExportVmm(CudaExport* e);

// A new POSIX fd (close-on-exec) naming the allocation mapped at `base`; the
// caller closes it. REQUIRES: `base` lies in memory still registered (mapped).
Result<Fd> ExportVmmFd(int device, uint64_t base);

// Owns one reference to a generic allocation handle (cuMemRelease on destruction).
class VmmHandle {
 public:
  explicit VmmHandle(CUmemGenericAllocationHandle h) : h_(h), owned_(true) {}
  VmmHandle(VmmHandle&& o) noexcept : h_(o.h_), owned_(std::exchange(o.owned_, false)) {}
  VmmHandle& operator=(VmmHandle&&) = delete;
  ~VmmHandle() {
    if (owned_) (void)Driver().release(h_);
  }
  CUmemGenericAllocationHandle get() const { return h_; }

 private:
  CUmemGenericAllocationHandle h_ = 0;
  bool owned_ = false;
};

// A peer's kVmm export mapped into this process. Unmaps and frees its address
// range on destruction (the allocations go when the exporter's go too).
// Thread-safety: none; owned by one channel under its build mutex.
class VmmMapping {
 public:
  // Returns a fresh fd for allocation `index` of the export (asks the exporter).
  using FetchFd = std::function<Result<Fd>(uint32_t index)>;
  // Imports every allocation of `e` (fabric handle first when offered, else the
  // fd `fetch` returns, closed once imported), maps them back to back and grants
  // `device` read/write access. REQUIRES: e.kind == kVmm (decoded, so checked).
  static Result<std::unique_ptr<VmmMapping>> Map(const CudaExport& e, int device,
                                                 const FetchFd& fetch);
  ~VmmMapping();
  VmmMapping(const VmmMapping&) = delete;
  VmmMapping& operator=(const VmmMapping&) = delete;

  // Where the exporter's alloc_base lies in this process.
  uint64_t base() const { return va_; }

 private:
  VmmMapping() = default;

  uint64_t va_ = 0;                                    // reserved range
  uint64_t reserved_ = 0;                              // its length (0: nothing reserved)
  std::vector<std::pair<uint64_t, uint64_t>> mapped_;  // (address, length) of each cuMemMap
};

}  // namespace kvlane::core
