// Memory kinds and registered-region identifiers.
#pragma once

#include <cstdint>

namespace kvlane {

enum class MemoryKind : uint8_t {
  kHost = 0,  // host DRAM (pageable or pinned)
  kCuda = 1,  // CUDA device memory (cuda transport)
};

const char* MemoryKindName(MemoryKind kind);

// What peers may do to a registered region. It binds remote access only: the
// owning agent uses its own memory in local lists as it likes.
enum class Access : uint8_t {
  kReadWrite = 0,  // peers may READ and WRITE it (the default)
  kReadOnly = 1,   // peers may only READ it; a WRITE into it fails with kNotAllowed
};

// "read-write" or "read-only".
const char* AccessName(Access access);

// Identifies one RegisterMemory call; covers every piece the region was cut into.
struct RegionId {
  uint64_t value = 0;
  bool valid() const { return value != 0; }
};

}  // namespace kvlane
