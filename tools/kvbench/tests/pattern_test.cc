#include "pattern.h"

#include <gtest/gtest.h>

#include <vector>

namespace kvbench {
namespace {

TEST(Pattern, FillThenVerifyPasses) {
  std::vector<uint8_t> buf(4096 + 13);
  FillPattern(buf.data(), buf.size(), 1000, 0, 7);
  VerifyResult r = VerifyPattern(buf.data(), buf.size(), 1000, 0, 7);
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.checked, buf.size());
  EXPECT_EQ(r.first_mismatch, -1);
}

TEST(Pattern, SingleFlippedByteIsCaught) {
  std::vector<uint8_t> buf(1 << 16);
  for (size_t at : {size_t{0}, size_t{5}, size_t{4097}, buf.size() - 1}) {
    FillPattern(buf.data(), buf.size(), 8, 1, 3);
    buf[at] ^= 0x01;
    VerifyResult r = VerifyPattern(buf.data(), buf.size(), 8, 1, 3);
    EXPECT_EQ(r.mismatches, 1u) << at;
    EXPECT_EQ(r.first_mismatch, static_cast<int64_t>(at));
  }
}

TEST(Pattern, UnalignedOffsetsMatchAlignedFill) {
  std::vector<uint8_t> whole(256), part(100);
  FillPattern(whole.data(), whole.size(), 0, 1, 9);
  FillPattern(part.data(), part.size(), 37, 1, 9);
  EXPECT_TRUE(std::equal(part.begin(), part.end(), whole.begin() + 37));
}

TEST(Pattern, RankEpochAndOffsetAllMatter) {
  std::vector<uint8_t> buf(512);
  FillPattern(buf.data(), buf.size(), 0, 0, 1);
  EXPECT_FALSE(VerifyPattern(buf.data(), buf.size(), 0, 1, 1).ok());  // other rank
  EXPECT_FALSE(VerifyPattern(buf.data(), buf.size(), 0, 0, 2).ok());  // stale epoch
  EXPECT_FALSE(VerifyPattern(buf.data(), buf.size(), 8, 0, 1).ok());  // shifted source
}

TEST(Pattern, SentinelIsNotThePattern) {
  std::vector<uint8_t> buf(4096);
  WipeSentinel(buf.data(), buf.size());
  VerifyResult r = VerifyPattern(buf.data(), buf.size(), 0, 0, 1);
  EXPECT_GT(r.mismatches, buf.size() - 64);
  EXPECT_EQ(r.first_mismatch, 0);
}

TEST(Pattern, MergeKeepsTheFirstOffset) {
  VerifyResult total;
  total.Merge({100, 0, -1}, 0);
  total.Merge({100, 2, 10}, 5000);
  total.Merge({100, 1, 3}, 100);
  EXPECT_EQ(total.checked, 300u);
  EXPECT_EQ(total.mismatches, 3u);
  EXPECT_EQ(total.first_mismatch, 5010);
}

}  // namespace
}  // namespace kvbench
