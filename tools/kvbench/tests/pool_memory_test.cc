#include "pool_memory.h"

#include <gtest/gtest.h>

namespace kvbench {
namespace {

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kGiB = 1ull << 30;

// A host pool that fits in MemAvailable but not in what the process's cgroup limit
// leaves is refused before it is populated (the OOM killer would strike), the error
// naming the cgroup's limit and usage; the same pool within the headroom is allocated.
TEST(PoolMemory, AHostPoolIsCheckedAgainstTheCgroupsHeadroom) {
  HostMemory host;
  host.mem_available = 23 * kGiB;
  host.cgroup = CgroupLimit{"/sys/fs/cgroup/memory.max", 8 * kGiB, 8 * kGiB - 64 * kMiB};
  auto refused = PoolMemory::Allocate(256 * kMiB, kvlane::MemoryKind::kHost, 0, host);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find(
                "268435456 B (0.25 GiB) requested, the 0.06 GiB free under cgroup memory.max "
                "8.00 GiB of which 7.94 GiB used (/sys/fs/cgroup/memory.max; MemAvailable "
                "23.00 GiB): not enough free memory"),
            std::string::npos)
      << refused.status().message();
  host.cgroup->usage = 4 * kGiB;
  auto pool = PoolMemory::Allocate(16 * kMiB, kvlane::MemoryKind::kHost, 0, host);
  ASSERT_TRUE(pool.ok()) << pool.status().message();
  EXPECT_EQ(pool.value()->bytes(), 16 * kMiB);
}

// MemAvailable alone (no cgroup limit) is named as before.
TEST(PoolMemory, AHostPoolOverMemAvailableNamesIt) {
  HostMemory host;
  host.mem_available = 64 * kMiB;
  auto refused = PoolMemory::Allocate(256 * kMiB, kvlane::MemoryKind::kHost, 0, host);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("requested, MemAvailable 0.06 GiB: not enough"),
            std::string::npos)
      << refused.status().message();
}

}  // namespace
}  // namespace kvbench
