// Descriptors: byte ranges inside registered memory. Plain values.
#pragma once

#include <cstdint>
#include <vector>

#include "kvlane/memory.h"

namespace kvlane {

// One contiguous byte range. `addr` is a virtual address in the owning process
// (local lists) or in the peer process (remote lists).
struct Desc {
  uint64_t addr = 0;
  uint64_t len = 0;
  int32_t device = 0;  // CUDA ordinal, informational: the engine uses the device addr is on
};

// A list of descriptors of one memory kind. Local and remote lists of a transfer
// pair up one to one (same count, same length per pair).
struct DescList {
  MemoryKind kind = MemoryKind::kHost;
  std::vector<Desc> descs;

  void Add(const void* ptr, uint64_t len, int32_t device = 0) {
    descs.push_back({reinterpret_cast<uint64_t>(ptr), len, device});
  }
  void Add(uint64_t addr, uint64_t len, int32_t device = 0) { descs.push_back({addr, len, device}); }
};

}  // namespace kvlane
