// Importer side of VMM sharing: a peer's allocations mapped back to back.
#include <algorithm>
#include <cstring>

#include "transport/cuda/vmm.h"

namespace kvlane::core {
namespace {

// Fabric handle first when offered (no round trip), else the exporter's fd.
Result<VmmHandle> Import(const CudaVmmAlloc& a, uint32_t index, const VmmMapping::FetchFd& fetch) {
  const DriverApi& d = Driver();
  CUmemGenericAllocationHandle h = 0;
  if (a.handles & kVmmFabric) {
    CUmemFabricHandle fh{};
    std::memcpy(fh.data, a.fabric.data(), sizeof(fh.data));
    CUresult r = d.import_handle(&h, &fh, CU_MEM_HANDLE_TYPE_FABRIC);
    if (r == CUDA_SUCCESS) return VmmHandle(h);
    if (!(a.handles & kVmmPosixFd))
      return DriverStatus(r, "cuMemImportFromShareableHandle(fabric)", __FILE__, __LINE__);
  }
  KVLANE_ASSIGN_OR_RETURN(Fd fd, fetch(index));
  void* os_handle = reinterpret_cast<void*>(static_cast<uintptr_t>(fd.get()));
  KVLANE_CU(d.import_handle(&h, os_handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
  return VmmHandle(h);  // `fd` closes here: the imported handle holds the allocation
}

// The minimum mapping granularity of an allocation (0 when unknown).
size_t Granularity(CUmemGenericAllocationHandle h) {
  CUmemAllocationProp prop{};
  size_t g = 0;
  if (Driver().handle_props(&prop, h) != CUDA_SUCCESS ||
      Driver().granularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS)
    return 0;
  return g;
}

}  // namespace

Result<std::unique_ptr<VmmMapping>> VmmMapping::Map(const CudaExport& e, int device,
                                                    const FetchFd& fetch) {
  const DriverApi& d = Driver();
  if (!d.vmm()) return Status::NotSupported("the CUDA driver lacks the VMM entry points");
  std::vector<VmmHandle> handles;
  size_t align = 0;
  for (uint32_t i = 0; i < e.allocs.size(); ++i) {
    KVLANE_ASSIGN_OR_RETURN(VmmHandle h, Import(e.allocs[i], i, fetch));
    align = std::max(align, Granularity(h.get()));
    handles.push_back(std::move(h));
  }
  std::unique_ptr<VmmMapping> m(new VmmMapping());
  CUdeviceptr va = 0;
  KVLANE_CU(d.reserve(&va, e.alloc_len, align, 0, 0));
  m->va_ = va;
  m->reserved_ = e.alloc_len;
  for (size_t i = 0; i < e.allocs.size(); ++i) {
    const CudaVmmAlloc& a = e.allocs[i];
    const uint64_t at = va + (a.base - e.alloc_base);
    KVLANE_CU(d.map(at, a.len, 0, handles[i].get(), 0));
    m->mapped_.emplace_back(at, a.len);
  }
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = device;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  KVLANE_CU(d.set_access(va, e.alloc_len, &access, 1));
  return m;  // `handles` released here: the mappings keep the allocations
}

VmmMapping::~VmmMapping() {
  for (auto& [at, len] : mapped_) (void)Driver().unmap(at, len);
  if (reserved_ != 0) (void)Driver().address_free(va_, reserved_);
}

}  // namespace kvlane::core
