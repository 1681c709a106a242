#include "block_table.h"

#include <gtest/gtest.h>

#include <set>
#include <vector>

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

// The slots of `t` from request 0 on, `n` of them.
std::vector<uint64_t> Slots(const BlockTable& t, uint64_t n) {
  auto s = t.Slice(0, n);
  return {s.begin(), s.end()};
}

TEST(BlockTable, PortableValues) {
  // Pinned so that a port to another compiler or libc yields the same tables
  // (two ranks built apart must agree). The tables were computed apart from this
  // code, by a Python transcription of splitmix64 + Fisher-Yates (block_table.h).
  EXPECT_EQ(SplitMix64(0).Next(), 0xe220a8397b1dcdafull);
  EXPECT_EQ(Slots(BlockTable(0, 0, 8), 8), (std::vector<uint64_t>{3, 0, 2, 1, 5, 6, 7, 4}));
  EXPECT_EQ(Slots(BlockTable(42, 3, 16), 16),
            (std::vector<uint64_t>{11, 10, 12, 9, 1, 0, 7, 13, 8, 4, 2, 3, 14, 15, 6, 5}));
}

}  // namespace
}  // namespace kvbench
