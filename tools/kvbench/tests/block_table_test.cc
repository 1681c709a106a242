#include "block_table.h"

#include <gtest/gtest.h>

#include <set>

namespace kvbench {
namespace {

TEST(BlockTable, IsAPermutation) {
  BlockTable t(42, 0, 1000);
  std::set<uint64_t> seen;
  for (uint64_t i = 0; i < 10; ++i) {
    for (uint64_t s : t.Slice(i, 100)) seen.insert(s);
  }
  EXPECT_EQ(seen.size(), 1000u);
  EXPECT_EQ(*seen.rbegin(), 999u);
}

TEST(BlockTable, RequestSlicesAreDisjoint) {
  BlockTable t(7, 3, 4 * 98);
  std::set<uint64_t> seen;
  for (uint64_t r = 0; r < 4; ++r) {
    for (uint64_t s : t.Slice(r, 98)) EXPECT_TRUE(seen.insert(s).second) << "slot reused " << s;
  }
}

TEST(BlockTable, DeterministicFromTheSeed) {
  BlockTable a(1234, 2, 500), b(1234, 2, 500);
  auto sa = a.Slice(0, 500), sb = b.Slice(0, 500);
  EXPECT_TRUE(std::equal(sa.begin(), sa.end(), sb.begin()));
}

TEST(BlockTable, SeedAndStreamChangeThePermutation) {
  BlockTable a(1, 0, 500), b(2, 0, 500), c(1, 1, 500);
  auto sa = a.Slice(0, 500), sb = b.Slice(0, 500), sc = c.Slice(0, 500);
  EXPECT_FALSE(std::equal(sa.begin(), sa.end(), sb.begin()));
  EXPECT_FALSE(std::equal(sa.begin(), sa.end(), sc.begin()));
}

TEST(BlockTable, PortableValues) {
  // Pinned so that a port to another compiler or libc yields the same tables.
  EXPECT_EQ(SplitMix64(0).Next(), 0xe220a8397b1dcdafull);
  BlockTable t(0, 0, 8);
  std::vector<uint64_t> first(t.Slice(0, 8).begin(), t.Slice(0, 8).end());
  BlockTable again(0, 0, 8);
  EXPECT_EQ(first, std::vector<uint64_t>(again.Slice(0, 8).begin(), again.Slice(0, 8).end()));
}

}  // namespace
}  // namespace kvbench
