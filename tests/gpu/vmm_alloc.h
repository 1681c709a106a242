// VMM device memory for the GPU tests: `parts` allocations (cuMemCreate) of
// equal size mapped back to back into one reserved range, read/write for the
// device that holds them. Driver calls go through kvlane's Driver().
#pragma once

#include <cstdint>
#include <string>

namespace kvlane::test {

// "" when `device` supports VMM and POSIX-fd export; otherwise why not.
std::string VmmUnsupported(int device);

// Allocates at least `bytes` as `parts` allocations on `device`, created with
// `handle_types` (CUmemAllocationProp::requestedHandleTypes: 0 = not
// exportable, 1 = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR). Each part is
// rounded up to the allocation granularity. Returns nullptr and sets *error on
// failure. REQUIRES: bytes > 0, parts >= 1.
void* VmmAlloc(int device, uint64_t bytes, int parts, unsigned handle_types, std::string* error);

// Size of each part of a VmmAlloc of `bytes` in `parts` (0 when unknown).
uint64_t VmmPartBytes(int device, uint64_t bytes, int parts);

// Unmaps and frees what VmmAlloc returned.
void VmmFree(void* p);

}  // namespace kvlane::test
