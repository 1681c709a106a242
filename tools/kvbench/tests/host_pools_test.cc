#include "host_pools.h"

#include <gtest/gtest.h>

#include <optional>
#include <vector>

namespace kvbench {
namespace {

constexpr uint64_t kGiB = 1ull << 30;

// The finding: --pool-budget 16GiB gave each rank 10.96 GiB; each fit in 90% of a
// 24 GiB host's MemAvailable alone, both together did not.
TEST(HostPools, TwoPoolsOnOneHostAreCountedTogether) {
  HostPools p;
  p.target_bytes = p.initiator_bytes = 10960 * (kGiB / 1000);
  p.bound.bytes = 23 * kGiB;
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
  p.bound = {kGiB, "the 1.00 GiB free under cgroup memory.max 8.00 GiB of which 7.00 GiB used"};
  kvlane::Status s = CheckSharedHostMemory(p, true);
  ASSERT_EQ(s.code(), kvlane::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("more than 90% of the 1.00 GiB free under cgroup memory.max 8.00 "
                             "GiB of which 7.00 GiB used;"),
            std::string::npos)
      << s.message();
}

// This rank's memory: MemAvailable and, optionally, a cgroup limit with its identity.
HostMemory Memory(uint64_t available, std::optional<CgroupLimit> cgroup = std::nullopt) {
  std::vector<CgroupLimit> limits;
  if (cgroup.has_value()) limits.push_back(*cgroup);
  return FromLimits(available, std::move(limits));
}

CgroupLimit Cgroup(uint64_t limit, uint64_t usage, CgroupId id,
                   std::string file = "/sys/fs/cgroup/memory.max") {
  return {std::move(file), limit, usage, 0, id};
}

// What this rank would read of a peer whose memory is `m` (its plan message's fields).
PeerHost AsPeer(const HostMemory& m) { return ReadPeerHost(HostMemoryFields(m)); }

// Checks pools of `each` B on both ranks, one host, as rank 1 does.
kvlane::Status CheckBoth(uint64_t each, const HostMemory& mine, const HostMemory& peer) {
  HostPools p;
  p.target_bytes = p.initiator_bytes = each;
  p.bound = SharedBound(mine, AsPeer(peer), 0);
  return CheckSharedHostMemory(p, /*same_host=*/true);
}

// The finding: two pods on one node (one boot id, so one host) each with an 8 GiB
// limit and a 4 GiB pool were refused, both pools summed against one pod's room,
// though each pool is charged to its own pod's cgroup. Only MemAvailable is shared.
TEST(HostPools, TwoPodsOnOneNodeEachHaveTheirOwnCgroup) {
  const HostMemory pod1 = Memory(200 * kGiB, Cgroup(8 * kGiB, kGiB / 2, {40, 1001}));
  const HostMemory pod2 = Memory(200 * kGiB, Cgroup(8 * kGiB, kGiB / 2, {40, 1002}));
  EXPECT_TRUE(CheckBoth(4 * kGiB, pod1, pod2).ok()) << CheckBoth(4 * kGiB, pod1, pod2).message();
  EXPECT_TRUE(CheckBoth(4 * kGiB, pod2, pod1).ok());
  const MemoryBound b = SharedBound(pod1, AsPeer(pod2), 0);
  EXPECT_EQ(b.bytes, 200 * kGiB);
  EXPECT_EQ(b.description, "MemAvailable 200.00 GiB");
  // The node's MemAvailable is still shared.
  const HostMemory tight = Memory(8 * kGiB, Cgroup(8 * kGiB, kGiB / 2, {40, 1002}));
  const kvlane::Status s = CheckBoth(4 * kGiB, pod1, tight);
  EXPECT_EQ(s.code(), kvlane::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("more than 90% of rank 0's MemAvailable 8.00 GiB;"), std::string::npos)
      << s.message();
}

// Two ranks in one cgroup (one container, or two under one limiting pod) share its
// room: both pools count against it, by the smaller room either reads.
TEST(HostPools, RanksInOneCgroupShareItsRoom) {
  const HostMemory mine = Memory(200 * kGiB, Cgroup(8 * kGiB, kGiB / 2, {40, 1001}));
  const HostMemory peer = Memory(200 * kGiB, Cgroup(8 * kGiB, kGiB, {40, 1001}));
  const kvlane::Status s = CheckBoth(4 * kGiB, mine, peer);
  ASSERT_EQ(s.code(), kvlane::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("more than 90% of the 7.00 GiB free as rank 0 reads the cgroup both "
                             "ranks are under (/sys/fs/cgroup/memory.max);"),
            std::string::npos)
      << s.message();
  MemoryBound b = SharedBound(peer, AsPeer(mine), 1);
  EXPECT_EQ(b.bytes, 7 * kGiB);
  EXPECT_EQ(b.description,
            "the 7.00 GiB free under cgroup memory.max 8.00 GiB of which 1.00 GiB used, a cgroup "
            "both ranks are under (/sys/fs/cgroup/memory.max)");
  EXPECT_TRUE(CheckBoth(3 * kGiB, mine, peer).ok());
  // A cgroup with no room is known (1 B), not unknown.
  const HostMemory full = Memory(200 * kGiB, Cgroup(8 * kGiB, 9 * kGiB, {40, 1001}));
  EXPECT_EQ(SharedBound(mine, AsPeer(full), 0).bytes, 1u);
  EXPECT_EQ(SharedBound(full, AsPeer(mine), 0).bytes, 1u);
  // An identity unknown on either side is never the same cgroup.
  const HostMemory unnamed = Memory(200 * kGiB, Cgroup(8 * kGiB, kGiB, {}));
  EXPECT_TRUE(CheckBoth(4 * kGiB, unnamed, unnamed).ok());
  EXPECT_TRUE(CheckBoth(4 * kGiB, mine, unnamed).ok());
}

// The finding: two ranks in sibling cgroups (two containers of one pod, two services
// of one slice) under a limited common ancestor were each checked against their own
// limit only, and the ancestor's, which bounds both pools together, not at all:
// each rank listed only the cgroup that left it least room. Each lists every limited
// level now, and a common one is shared.
TEST(HostPools, RanksUnderOneLimitedAncestorShareItsRoom) {
  const CgroupLimit pod = Cgroup(10 * kGiB, 2 * kGiB, {40, 10}, "/sys/fs/cgroup/pod/memory.max");
  const HostMemory ctr1 = FromLimits(
      200 * kGiB, {Cgroup(6 * kGiB, kGiB, {40, 11}, "/sys/fs/cgroup/pod/c1/memory.max"), pod});
  const HostMemory ctr2 = FromLimits(
      200 * kGiB, {Cgroup(6 * kGiB, kGiB, {40, 12}, "/sys/fs/cgroup/pod/c2/memory.max"), pod});
  ASSERT_EQ(ctr1.cgroup->file, "/sys/fs/cgroup/pod/c1/memory.max");  // 5 GiB: the tightest
  // 4 GiB each fits its own container's 5 GiB, not the pod's 8 GiB together.
  const kvlane::Status s = CheckBoth(4 * kGiB, ctr1, ctr2);
  ASSERT_EQ(s.code(), kvlane::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("more than 90% of the 8.00 GiB free under cgroup memory.max 10.00 "
                             "GiB of which 2.00 GiB used, a cgroup both ranks are under "
                             "(/sys/fs/cgroup/pod/memory.max);"),
            std::string::npos)
      << s.message();
  EXPECT_EQ(CheckBoth(4 * kGiB, ctr2, ctr1).code(), kvlane::Code::kInvalidArgument);
  EXPECT_TRUE(CheckBoth(3 * kGiB, ctr1, ctr2).ok());
  // The smaller room either reads of the shared level counts.
  const HostMemory busier = FromLimits(
      200 * kGiB, {Cgroup(6 * kGiB, kGiB, {40, 12}, "/sys/fs/cgroup/pod/c2/memory.max"),
                   Cgroup(10 * kGiB, 4 * kGiB, {40, 10}, "/sys/fs/cgroup/pod/memory.max")});
  EXPECT_EQ(SharedBound(ctr1, AsPeer(busier), 1).bytes, 6 * kGiB);
  // A peer of the build before "cgroups" compared the tightest cgroups alone (here the
  // two containers): so does this rank with it, and both decide alike.
  nlohmann::json older = HostMemoryFields(ctr2);
  older["host_memory"].erase("cgroups");
  EXPECT_FALSE(ReadPeerHost(older).listed);
  EXPECT_EQ(SharedBound(ctr1, ReadPeerHost(older), 1).bytes, 200 * kGiB);
  const HostMemory podwide = FromLimits(200 * kGiB, {pod});  // the pod is its tightest
  older = HostMemoryFields(podwide);
  older["host_memory"].erase("cgroups");
  EXPECT_EQ(SharedBound(ctr1, ReadPeerHost(older), 1).bytes, 200 * kGiB);  // not ctr1's tightest
  EXPECT_EQ(SharedBound(podwide, ReadPeerHost(older), 1).bytes, 8 * kGiB);
}

// MemAvailable: the smaller of the two, each named; a side that does not know it
// leaves the other's.
TEST(HostPools, TheSmallerMemAvailableIsShared) {
  MemoryBound b = SharedBound(Memory(3 * kGiB), AsPeer(Memory(2 * kGiB)), 1);
  EXPECT_EQ(b.bytes, 2 * kGiB);
  EXPECT_EQ(b.description, "rank 1's MemAvailable 2.00 GiB");
  b = SharedBound(Memory(kGiB), AsPeer(Memory(2 * kGiB)), 1);
  EXPECT_EQ(b.description, "MemAvailable 1.00 GiB");
  b = SharedBound(Memory(0), AsPeer(Memory(2 * kGiB)), 0);
  EXPECT_EQ(b.bytes, 2 * kGiB);
  EXPECT_EQ(SharedBound(Memory(kGiB), AsPeer(Memory(0)), 0).bytes, kGiB);
  EXPECT_EQ(SharedBound(Memory(0), AsPeer(Memory(0)), 0).bytes, 0u);
}

// A peer of an older build sends its bound alone ("mem_available", the smaller of its
// MemAvailable and cgroup room): both pools are checked against the smaller of that and
// this rank's bound, as that build checks them, so both ranks decide alike.
TEST(HostPools, AnOlderPeersBoundIsCheckedAsThatBuildDoes) {
  const PeerHost old = ReadPeerHost(
      {{"boot_id", "b"}, {"mem_available", 5 * kGiB}, {"mem_bound", "the 5.00 GiB free ..."}});
  EXPECT_FALSE(old.apart);
  EXPECT_EQ(old.mem_available, 5 * kGiB);
  const HostMemory mine = Memory(200 * kGiB, Cgroup(8 * kGiB, kGiB, {40, 1}));
  MemoryBound b = SharedBound(mine, old, 0);
  EXPECT_EQ(b.bytes, 5 * kGiB);
  EXPECT_EQ(b.description,
            "rank 0's host memory bound 5.00 GiB (MemAvailable, or its cgroup's room where "
            "smaller)");
  b = SharedBound(Memory(200 * kGiB, Cgroup(8 * kGiB, 4 * kGiB, {40, 1})), old, 0);
  EXPECT_EQ(b.bytes, 4 * kGiB);
  EXPECT_NE(b.description.find("the 4.00 GiB free under cgroup memory.max"), std::string::npos);
  // What this build sends an older one: its bound and description, as before.
  const nlohmann::json sent = HostMemoryFields(mine);
  EXPECT_EQ(sent["mem_available"], 7 * kGiB);
  EXPECT_EQ(sent["mem_bound"], mine.Describe());
}

// The finding: the peer's "mem_bound" text went into this rank's error as it came
// (any length, control characters and all). Errors are now worded here, from the
// peer's numbers; its text is not read.
TEST(HostPools, APeersTextNeverReachesTheError) {
  const std::string hostile = "\x1b[2J\x1b[31mfree\nfake line" + std::string(100000, 'x');
  for (const nlohmann::json& theirs :
       {nlohmann::json{{"mem_available", kGiB}, {"mem_bound", hostile}},
        nlohmann::json{{"mem_bound", hostile}, {"host_memory", {{"mem_available", kGiB}}}}}) {
    HostPools p;
    p.target_bytes = p.initiator_bytes = kGiB;
    p.bound = SharedBound(Memory(8 * kGiB), ReadPeerHost(theirs), 0);
    const kvlane::Status s = CheckSharedHostMemory(p, true);
    ASSERT_FALSE(s.ok());
    EXPECT_LT(s.message().size(), 400u);
    EXPECT_EQ(s.message().find('\x1b'), std::string::npos);
    EXPECT_EQ(s.message().find('\n'), std::string::npos);
    EXPECT_EQ(s.message().find("xxxx"), std::string::npos);
  }
}

TEST(HostPools, PoolsOnTwoHostsAreEachTheirOwnHostsConcern) {
  HostPools p;
  p.target_bytes = p.initiator_bytes = 11 * kGiB;
  p.bound.bytes = 23 * kGiB;
  EXPECT_TRUE(CheckSharedHostMemory(p, /*same_host=*/false).ok());
}

TEST(HostPools, PoolsThatFitTogetherPass) {
  HostPools p;
  p.target_bytes = p.initiator_bytes = 5 * kGiB;
  p.bound.bytes = 12 * kGiB;  // 10 GiB of 10.8
  EXPECT_TRUE(CheckSharedHostMemory(p, true).ok());
  p.initiator_bytes = 6 * kGiB;  // 11 GiB of 10.8
  EXPECT_FALSE(CheckSharedHostMemory(p, true).ok());
}

// A device pool is not in host memory; an unknown MemAvailable checks nothing.
TEST(HostPools, OnlyHostPoolsAndAKnownMemAvailableCount) {
  HostPools p;
  p.target_bytes = 10 * kGiB;
  p.initiator_bytes = 0;  // on a GPU
  p.bound.bytes = 12 * kGiB;
  EXPECT_TRUE(CheckSharedHostMemory(p, true).ok());
  p.initiator_bytes = 10 * kGiB;
  p.bound.bytes = 0;
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
// type threw. Each reads as unknown; so does a number over 2^60 B (no host has it).
TEST(HostPools, APeersHostFieldsAreReadAsUntrusted) {
  PeerHost p = ReadPeerHost({{"boot_id", "boot-1"}, {"mem_available", 12 * kGiB}});
  EXPECT_EQ(p.boot_id, "boot-1");
  EXPECT_EQ(p.mem_available, 12 * kGiB);
  const std::vector<nlohmann::json> odd = {nlohmann::json(-1),           nlohmann::json(0),
                                           nlohmann::json(1e300),        nlohmann::json(-5.0),
                                           nlohmann::json("12"),         nlohmann::json(),
                                           nlohmann::json(5.0),          nlohmann::json(1ull << 61),
                                           nlohmann::json(uint64_t(-1)), nlohmann::json::object()};
  for (const nlohmann::json& v : odd) {
    EXPECT_EQ(ReadPeerHost({{"mem_available", v}}).mem_available, 0u) << v.dump();
    const PeerHost apart =
        ReadPeerHost({{"host_memory",
                       {{"mem_available", v}, {"cgroup", {{"room", v}, {"dev", 1}, {"ino", 2}}}}}});
    EXPECT_TRUE(apart.apart);
    EXPECT_EQ(apart.mem_available, 0u) << v.dump();
    // 0 B of room is known (no room left); anything else odd is no cgroup.
    EXPECT_EQ(apart.cgroup.has_value(), v == nlohmann::json(0)) << v.dump();
  }
  // A cgroup whose identity is odd is a cgroup of unknown identity.
  for (const nlohmann::json& id : {nlohmann::json(-1), nlohmann::json("7"), nlohmann::json()}) {
    const PeerHost c =
        ReadPeerHost({{"host_memory", {{"cgroup", {{"room", kGiB}, {"dev", id}, {"ino", 2}}}}}});
    ASSERT_TRUE(c.cgroup.has_value());
    EXPECT_EQ(c.cgroup->room, kGiB);
    EXPECT_FALSE(c.cgroup->id.Known()) << id.dump();
  }
  // "cgroups": an array of cgroups with known identities, the first kMaxCgroups read;
  // anything else in it is passed over.
  nlohmann::json listed = nlohmann::json::array({{{"room", kGiB}, {"dev", 1}, {"ino", 2}},
                                                 {{"room", kGiB}, {"ino", 3}},
                                                 "x",
                                                 7,
                                                 {{"room", -1}, {"dev", 1}, {"ino", 4}},
                                                 {{"room", 0}, {"dev", 1}, {"ino", 5}}});
  PeerHost c = ReadPeerHost({{"host_memory", {{"cgroups", listed}}}});
  EXPECT_TRUE(c.listed);
  ASSERT_EQ(c.cgroups.size(), 2u);
  EXPECT_TRUE(c.cgroups[0].id.SameAs({1, 2}));
  EXPECT_TRUE(c.cgroups[1].id.SameAs({1, 5}));
  EXPECT_EQ(c.cgroups[1].room, 0u);
  EXPECT_FALSE(c.cgroup.has_value());
  for (const nlohmann::json& odd :
       {nlohmann::json("x"), nlohmann::json::object(), nlohmann::json()}) {
    c = ReadPeerHost({{"host_memory", {{"cgroups", odd}}}});
    EXPECT_TRUE(c.listed);
    EXPECT_TRUE(c.cgroups.empty()) << odd.dump();
  }
  nlohmann::json many = nlohmann::json::array();
  for (uint64_t i = 1; i <= 1000; ++i) many.push_back({{"room", kGiB}, {"dev", 1}, {"ino", i}});
  c = ReadPeerHost({{"host_memory", {{"cgroups", many}}}});
  ASSERT_EQ(c.cgroups.size(), kMaxCgroups);
  EXPECT_TRUE(c.cgroups.back().id.SameAs({1, kMaxCgroups}));
  EXPECT_FALSE(ReadPeerHost({{"host_memory", {{"cgroup", {{"room", kGiB}}}}}}).listed);
  EXPECT_FALSE(ReadPeerHost({{"host_memory", 7}}).apart);  // not an object: an older build's
  EXPECT_FALSE(ReadPeerHost({{"host_memory", {{"cgroup", "x"}}}}).cgroup.has_value());
  EXPECT_EQ(ReadPeerHost({{"boot_id", 7}}).boot_id, "");
  EXPECT_EQ(ReadPeerHost(nlohmann::json::array()).boot_id, "");
  EXPECT_FALSE(ReadPeerHost(nlohmann::json::array()).apart);
}

// This rank's fields, read back as its peer reads them.
TEST(HostPools, HostMemoryFieldsReadBackAsSent) {
  HostMemory m = Memory(23 * kGiB, Cgroup(8 * kGiB, 3 * kGiB, {40, 77}));
  PeerHost p = AsPeer(m);
  EXPECT_TRUE(p.apart);
  EXPECT_EQ(p.mem_available, 23 * kGiB);
  ASSERT_TRUE(p.cgroup.has_value());
  EXPECT_EQ(p.cgroup->room, 5 * kGiB);
  EXPECT_TRUE(p.cgroup->id.SameAs({40, 77}));
  ASSERT_EQ(p.cgroups.size(), 1u);
  EXPECT_TRUE(p.cgroups[0].id.SameAs({40, 77}));
  // Every limit with a known identity is listed, in order; one without is not.
  m = FromLimits(23 * kGiB, {Cgroup(8 * kGiB, 3 * kGiB, {40, 77}), Cgroup(9 * kGiB, kGiB, {}),
                             Cgroup(16 * kGiB, 2 * kGiB, {40, 70})});
  p = AsPeer(m);
  ASSERT_EQ(p.cgroups.size(), 2u);
  EXPECT_EQ(p.cgroups[1].room, 14 * kGiB);
  EXPECT_TRUE(p.cgroups[1].id.SameAs({40, 70}));
  p = AsPeer(Memory(0));
  EXPECT_TRUE(p.apart);
  EXPECT_EQ(p.mem_available, 0u);
  EXPECT_FALSE(p.cgroup.has_value());
  EXPECT_TRUE(p.listed);  // sent even when empty: the peer knows this build lists them
  EXPECT_TRUE(p.cgroups.empty());
  EXPECT_FALSE(HostMemoryFields(Memory(0))["host_memory"].contains("mem_available"));
}

TEST(HostPools, BootIdIsReadOnLinux) { EXPECT_EQ(BootId().size(), 36u) << BootId(); }

}  // namespace
}  // namespace kvbench
