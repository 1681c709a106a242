#include "host_pools.h"

#include <gtest/gtest.h>

namespace kvbench {
namespace {

constexpr uint64_t kGiB = 1ull << 30;

// The finding: --pool-budget 16GiB gave each rank 10.96 GiB; each fit in 90% of a
// 24 GiB host's MemAvailable alone, both together did not.
TEST(HostPools, TwoPoolsOnOneHostAreCountedTogether) {
  HostPools p;
  p.target_bytes = p.initiator_bytes = 10960 * (kGiB / 1000);
  p.mem_available = 23 * kGiB;
  kvlane::Status s = CheckSharedHostMemory(p, /*same_host=*/true);
  ASSERT_EQ(s.code(), kvlane::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("rank 0 (target) 10.96 GiB"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("rank 1 (initiator) 10.96 GiB"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("MemAvailable 23.00 GiB"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("--pool-budget"), std::string::npos) << s.message();
}

TEST(HostPools, PoolsOnTwoHostsAreEachTheirOwnHostsConcern) {
  HostPools p;
  p.target_bytes = p.initiator_bytes = 11 * kGiB;
  p.mem_available = 23 * kGiB;
  EXPECT_TRUE(CheckSharedHostMemory(p, /*same_host=*/false).ok());
}

TEST(HostPools, PoolsThatFitTogetherPass) {
  HostPools p;
  p.target_bytes = p.initiator_bytes = 5 * kGiB;
  p.mem_available = 12 * kGiB;  // 10 GiB of 10.8
  EXPECT_TRUE(CheckSharedHostMemory(p, true).ok());
  p.initiator_bytes = 6 * kGiB;  // 11 GiB of 10.8
  EXPECT_FALSE(CheckSharedHostMemory(p, true).ok());
}

// A device pool is not in host memory; an unknown MemAvailable checks nothing.
TEST(HostPools, OnlyHostPoolsAndAKnownMemAvailableCount) {
  HostPools p;
  p.target_bytes = 10 * kGiB;
  p.initiator_bytes = 0;  // on a GPU
  p.mem_available = 12 * kGiB;
  EXPECT_TRUE(CheckSharedHostMemory(p, true).ok());
  p.initiator_bytes = 10 * kGiB;
  p.mem_available = 0;
  EXPECT_TRUE(CheckSharedHostMemory(p, true).ok());
}

TEST(HostPools, SameHostByTransportHostNameOrBootId) {
  const HostIdentity a{"node-a", "boot-1"}, b{"node-b", "boot-2"};
  EXPECT_FALSE(SameHost("tcp", a, b));
  EXPECT_TRUE(SameHost("shm", a, b));
  EXPECT_TRUE(SameHost("local", a, b));
  EXPECT_TRUE(SameHost("tcp", a, HostIdentity{"node-a", "boot-2"}));
  // Two containers of one host: other host names, one kernel.
  EXPECT_TRUE(SameHost("tcp", a, HostIdentity{"node-b", "boot-1"}));
  // Unknown boot ids never match.
  EXPECT_FALSE(SameHost("tcp", HostIdentity{"node-a", ""}, HostIdentity{"node-b", ""}));
}

TEST(HostPools, BootIdIsReadOnLinux) { EXPECT_EQ(BootId().size(), 36u) << BootId(); }

}  // namespace
}  // namespace kvbench
