// The memcpy reference (reference.h) copies real bytes, also for a pair whose two
// sides are the same extent of the pool.
#include "reference.h"

#include <gtest/gtest.h>

#include <vector>

#include "self_pair.h"

namespace kvbench {
namespace {

constexpr uint64_t kExtent = 64ull << 20;

// contig at batch 1: each rank's one request sits at the same offset, so the
// reference pairs an extent with itself. It used to memmove the range onto
// itself, which returns at once: hundreds of thousands of GB/s. Copying 64 MiB
// takes some microseconds on any host (far over 1 TB/s is no copy at all).
TEST(MemcpyReference, AnExtentPairedWithItselfIsCopiedForReal) {
  std::vector<uint8_t> pool(kExtent, 0x5a);
  const testing::SelfPair self = testing::OneExtentPairedWithItself(kExtent);
  for (kvlane::Op op : {kvlane::Op::kRead, kvlane::Op::kWrite}) {
    const auto r = MemcpyReference(pool.data(), self.list, self.map, op, 3, StopCheck());
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->method, "memcpy");
    EXPECT_GT(r->p50_ms, 0.0);
    EXPECT_LT(r->gbps_p50, 1000.0) << "the reference copied nothing";
  }
  EXPECT_EQ(pool[kExtent / 2], 0x5a);  // the pool's bytes stay as they were
}

// Pairs of distinct extents are copied within the pool, as before.
TEST(MemcpyReference, DistinctExtentsAreCopiedWithinThePool) {
  std::vector<uint8_t> pool(2 * 4096, 0);
  std::fill(pool.begin(), pool.begin() + 4096, 0x11);
  PoolList list;
  list.extents = {{0, 4096}, {4096, 4096}};
  list.group_first = {0};
  BurstMap map;
  map.target = {{0}};
  map.initiator = {{1}};
  map.burst_bytes = 4096;
  ASSERT_TRUE(
      MemcpyReference(pool.data(), list, map, kvlane::Op::kRead, 1, StopCheck()).has_value());
  EXPECT_EQ(pool[4096 + 100], 0x11);  // READ: target side to initiator side
}

}  // namespace
}  // namespace kvbench
