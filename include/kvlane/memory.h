// Memory kinds and registered-region identifiers.
#pragma once

#include <cstdint>

namespace kvlane {

enum class MemoryKind : uint8_t {
  kHost = 0,  // host DRAM (pageable or pinned)
  kCuda = 1,  // CUDA device memory (cuda transport)
};

const char* MemoryKindName(MemoryKind kind);

// Identifies one RegisterMemory call; covers every piece the region was cut into.
struct RegionId {
  uint64_t value = 0;
  bool valid() const { return value != 0; }
};

}  // namespace kvlane
