#include "pool_memory.h"

#include <fmt/format.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstring>

#include "device_memory.h"
#include "run_config.h"

namespace kvbench {

namespace {

kvlane::Status NoRoom(uint64_t bytes, const char* why) {
  return kvlane::Status::Backend(fmt::format(
      "cannot allocate the KV pool: {} B ({:.2f} GiB) requested, MemAvailable {:.2f} GiB: {}; "
      "lower --pool-budget or the grid",
      bytes, bytes / double(1 << 30), MemAvailableBytes() / double(1 << 30), why));
}

}  // namespace

kvlane::Result<std::unique_ptr<PoolMemory>> PoolMemory::Allocate(uint64_t bytes,
                                                                 kvlane::MemoryKind kind,
                                                                 int device) {
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
  // Populating more than is free would wake the OOM killer instead of failing.
  uint64_t available = MemAvailableBytes();
  if (available != 0 && bytes > available / 10 * 9) return NoRoom(bytes, "not enough free memory");
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
                 -1, 0);
  if (p == MAP_FAILED) return NoRoom(bytes, std::strerror(errno));
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
