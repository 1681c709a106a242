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

// In a container the bound may be a cgroup's headroom: the error says which.
TEST(HostPools, TheErrorNamesTheBoundThatApplied) {
  HostPools p;
  p.target_bytes = p.initiator_bytes = kGiB;
  p.mem_available = kGiB;
  p.mem_bound = "the 1.00 GiB free under cgroup memory.max 8.00 GiB of which 7.00 GiB used";
  kvlane::Status s = CheckSharedHostMemory(p, true);
  ASSERT_EQ(s.code(), kvlane::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("more than 90% of the 1.00 GiB free under cgroup memory.max 8.00 "
                             "GiB of which 7.00 GiB used;"),
            std::string::npos)
      << s.message();
}

// Both ranks check against the smaller bound, each named: this rank's as it reads it,
// the peer's as rank N's (MemAvailable where the peer said no more).
TEST(HostPools, TheSmallerOfTheTwoRanksBoundsApplies) {
  const PeerHost peer{"boot-1", 2 * kGiB, "the 2.00 GiB free under cgroup memory.max"};
  MemoryBound b = SmallerBound(3 * kGiB, "MemAvailable 3.00 GiB", peer, 1);
  EXPECT_EQ(b.bytes, 2 * kGiB);
  EXPECT_EQ(b.description, "rank 1's the 2.00 GiB free under cgroup memory.max");
  b = SmallerBound(kGiB, "MemAvailable 1.00 GiB", peer, 1);
  EXPECT_EQ(b.bytes, kGiB);
  EXPECT_EQ(b.description, "MemAvailable 1.00 GiB");
  b = SmallerBound(0, "MemAvailable unknown", PeerHost{"", 2 * kGiB, ""}, 0);
  EXPECT_EQ(b.bytes, 2 * kGiB);
  EXPECT_EQ(b.description, "rank 0's MemAvailable 2.00 GiB");
  EXPECT_EQ(SmallerBound(kGiB, "mine", PeerHost{}, 0).bytes, kGiB);
  EXPECT_EQ(SmallerBound(0, "mine", PeerHost{}, 0).bytes, 0u);
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
  // Two containers of one host: other host names, one kernel.
  EXPECT_TRUE(SameHost("tcp", a, HostIdentity{"node-b", "boot-1"}));
  // Unknown boot ids never match.
  EXPECT_FALSE(SameHost("tcp", HostIdentity{"node-a", ""}, HostIdentity{"node-b", ""}));
}

// Two known boot ids decide alone: one host name on two kernels (two hosts named
// alike, or a name reused by a container) is two hosts.
TEST(HostPools, KnownBootIdsDecideOverHostNames) {
  EXPECT_FALSE(SameHost("tcp", {"node-a", "boot-1"}, {"node-a", "boot-2"}));
  EXPECT_FALSE(SameHost("tcp", {"unknown", "boot-1"}, {"unknown", "boot-2"}));
  EXPECT_TRUE(SameHost("tcp", {"node-a", "boot-1"}, {"node-b", "boot-1"}));
}

// Where a boot id is unknown, the host names decide, but an empty or "unknown"
// name (what a rank reports when it cannot read its own) matches nothing.
TEST(HostPools, HostNamesDecideOnlyWhereABootIdIsUnknown) {
  EXPECT_TRUE(SameHost("tcp", {"node-a", ""}, {"node-a", "boot-2"}));
  EXPECT_TRUE(SameHost("tcp", {"node-a", "boot-1"}, {"node-a", ""}));
  EXPECT_FALSE(SameHost("tcp", {"node-a", ""}, {"node-b", ""}));
  EXPECT_FALSE(SameHost("tcp", {"unknown", ""}, {"unknown", ""}));
  EXPECT_FALSE(SameHost("tcp", {"", ""}, {"", ""}));
  EXPECT_FALSE(SameHost("tcp", {"unknown", "boot-1"}, {"unknown", ""}));
}

// The peer's plan message is untrusted: a negative MemAvailable wrapped to a huge
// one (value<uint64_t>), a float out of range was undefined, a boot id of another
// type threw. Each reads as unknown.
TEST(HostPools, APeersHostFieldsAreReadAsUntrusted) {
  PeerHost p = ReadPeerHost(
      {{"boot_id", "boot-1"}, {"mem_available", 12 * kGiB}, {"mem_bound", "MemAvailable 12 GiB"}});
  EXPECT_EQ(p.boot_id, "boot-1");
  EXPECT_EQ(p.mem_available, 12 * kGiB);
  EXPECT_EQ(p.mem_bound, "MemAvailable 12 GiB");
  EXPECT_EQ(ReadPeerHost({{"mem_bound", 12}}).mem_bound, "");
  for (const nlohmann::json& odd : {nlohmann::json(-1), nlohmann::json(0), nlohmann::json(1e300),
                                    nlohmann::json(-5.0), nlohmann::json("12"), nlohmann::json()}) {
    EXPECT_EQ(ReadPeerHost({{"mem_available", odd}}).mem_available, 0u) << odd.dump();
  }
  EXPECT_EQ(ReadPeerHost({{"boot_id", 7}}).boot_id, "");
  EXPECT_EQ(ReadPeerHost(nlohmann::json::array()).boot_id, "");
}

TEST(HostPools, BootIdIsReadOnLinux) { EXPECT_EQ(BootId().size(), 36u) << BootId(); }

}  // namespace
}  // namespace kvbench
