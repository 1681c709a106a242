// Whether a range of this process's address space is host memory it may read
// (and write): every byte inside mappings with those permissions, as
// /proc/self/maps lists them. RegisterMemory asks it for kHost memory, so that
// a device pointer (CUDA reserves its address range without host access) or a
// wild address registered as host memory is refused there, not found later by a
// lane's copy faulting in this process or in a peer's. Thread-safe.
#pragma once

#include <cstdint>
#include <string_view>

#include "kvlane/status.h"

namespace kvlane::core {

// Ok when [addr, addr + len) lies in mappings that are readable and, with
// `writable`, writable; kInvalidArgument naming the first byte that is not.
// Ok when the maps cannot be read (no /proc): nothing to check against then.
// REQUIRES: len > 0 and addr + len does not wrap.
Status CheckHostMapped(uint64_t addr, uint64_t len, bool writable);

// The same over a maps text (the format of /proc/<pid>/maps): for tests.
Status CheckHostMappedIn(std::string_view maps, uint64_t addr, uint64_t len, bool writable);

}  // namespace kvlane::core
