// PoolMemory: the rank's KV pool, in host memory (anonymous mapping, populated up
// front so no page fault lands in a timed burst) or in CUDA device memory. Owns
// the allocation. Thread-compatible.
#pragma once

#include <cstdint>
#include <memory>

#include "host_memory.h"
#include "kvlane/memory.h"
#include "kvlane/status.h"

namespace kvbench {

class PoolMemory {
 public:
  // Fails with the numbers (requested, available) when the allocation fails. A host
  // pool is refused up front when it is over 90% of the host memory this process may
  // take (MemAvailable, or its cgroup's headroom where smaller: host_memory.h), the
  // error naming which bound applied.
  static kvlane::Result<std::unique_ptr<PoolMemory>> Allocate(uint64_t bytes,
                                                              kvlane::MemoryKind kind, int device);
  // The same, a host pool checked against `host` (a test's) instead of this
  // process's ReadHostMemory().
  static kvlane::Result<std::unique_ptr<PoolMemory>> Allocate(uint64_t bytes,
                                                              kvlane::MemoryKind kind, int device,
                                                              const HostMemory& host);
  ~PoolMemory();
  PoolMemory(const PoolMemory&) = delete;
  PoolMemory& operator=(const PoolMemory&) = delete;

  uint8_t* data() const { return data_; }  // a device pointer for kCuda
  uint64_t bytes() const { return bytes_; }
  kvlane::MemoryKind kind() const { return kind_; }
  int device() const { return device_; }

 private:
  PoolMemory(uint8_t* data, uint64_t bytes, kvlane::MemoryKind kind, int device)
      : data_(data), bytes_(bytes), kind_(kind), device_(device) {}
  uint8_t* data_;
  uint64_t bytes_;
  kvlane::MemoryKind kind_;
  int device_;
};

}  // namespace kvbench
