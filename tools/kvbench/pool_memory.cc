#include "pool_memory.h"

#include <fmt/format.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstring>

#include "device_memory.h"
#include "host_memory.h"

namespace kvbench {

namespace {

// `host`: the memory this process may take, and which bound applies (host_memory.h).
kvlane::Status NoRoom(uint64_t bytes, const HostMemory& host, const char* why) {
  return kvlane::Status::Backend(
      fmt::format("cannot allocate the KV pool: {} B ({:.2f} GiB) requested, {}: {}; "
                  "lower --pool-budget or the grid",
                  bytes, bytes / double(1 << 30), host.Describe(), why));
}

}  // namespace

kvlane::Result<std::unique_ptr<PoolMemory>> PoolMemory::Allocate(uint64_t bytes,
                                                                 kvlane::MemoryKind kind,
                                                                 int device) {
  // Read here, just before populating: the budget was sized from an earlier reading.
  return Allocate(bytes, kind, device,
                  kind == kvlane::MemoryKind::kHost ? ReadHostMemory() : HostMemory{});
}

kvlane::Result<std::unique_ptr<PoolMemory>> PoolMemory::Allocate(uint64_t bytes,
                                                                 kvlane::MemoryKind kind,
                                                                 int device,
                                                                 const HostMemory& host) {
  if (bytes == 0) return kvlane::Status::InvalidArgument("empty pool");
  if (kind == kvlane::MemoryKind::kCuda) {
    auto p = DeviceAlloc(device, bytes);
    if (!p.ok()) {
      return kvlane::Status::Backend(fmt::format(
          "cannot allocate the KV pool on {} ({}): {} B ({:.2f} GiB) requested, {:.2f} GiB "
          "free: {}; lower --pool-budget or the grid",
          DeviceName(device), device, bytes, bytes / double(1 << 30),
          DeviceFreeBytes(device) / double(1 << 30), p.status().message()));
    }
    return std::unique_ptr<PoolMemory>(
        new PoolMemory(static_cast<uint8_t*>(p.value()), bytes, kind, device));
  }
  // Populating more than is free (on the host, or under the process's cgroup limit)
  // would wake the OOM killer instead of failing.
  const uint64_t available = host.Bytes();
  if (available != 0 && bytes > available / 10 * 9) {
    return NoRoom(bytes, host, "not enough free memory");
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
                 -1, 0);
  if (p == MAP_FAILED) return NoRoom(bytes, host, std::strerror(errno));
  return std::unique_ptr<PoolMemory>(new PoolMemory(static_cast<uint8_t*>(p), bytes, kind, 0));
}

PoolMemory::~PoolMemory() {
  if (kind_ == kvlane::MemoryKind::kCuda) {
    DeviceFree(data_);
  } else {
    munmap(data_, bytes_);
  }
}

}  // namespace kvbench
