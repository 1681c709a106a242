#include "stats.h"

#include <gtest/gtest.h>

namespace kvbench {
namespace {

TEST(Stats, NearestRankPercentiles) {
  std::vector<double> v;
  for (int i = 20; i >= 1; --i) v.push_back(i);  // 1..20, unsorted
  EXPECT_EQ(Percentile(v, 0.50), 10);            // ceil(10) - 1 = index 9
  EXPECT_EQ(Percentile(v, 0.95), 19);            // ceil(19) - 1 = index 18
  EXPECT_EQ(Percentile(v, 1.0), 20);
  EXPECT_EQ(Percentile(v, 0.0), 1);
  EXPECT_EQ(Percentile(v, 0.01), 1);
}

TEST(Stats, SmallSamples) {
  EXPECT_EQ(Percentile({5}, 0.5), 5);
  EXPECT_EQ(Percentile({1, 2}, 0.5), 1);     // ceil(1) - 1 = 0
  EXPECT_EQ(Percentile({1, 2, 3}, 0.5), 2);  // ceil(1.5) - 1 = 1
  EXPECT_EQ(Percentile({1, 2, 3}, 0.95), 3);
  std::vector<double> sixteen;
  for (int i = 1; i <= 16; ++i) sixteen.push_back(i);
  EXPECT_EQ(Percentile(sixteen, 0.5), 8);
  EXPECT_EQ(Percentile(sixteen, 0.95), 16);  // ceil(15.2) - 1 = 15
}

TEST(Stats, Summary) {
  Summary s = Summarize({3, 1, 2, 4});
  EXPECT_EQ(s.p50, 2);
  EXPECT_EQ(s.p95, 4);
  EXPECT_EQ(s.min, 1);
  EXPECT_EQ(s.max, 4);
  EXPECT_EQ(s.n, 4u);
}

TEST(Stats, DecimalGigabytesPerSecond) {
  EXPECT_DOUBLE_EQ(GigabytesPerSecond(1000000000, 1000), 1.0);
  EXPECT_DOUBLE_EQ(GigabytesPerSecond(50000000, 10), 5.0);
  EXPECT_EQ(GigabytesPerSecond(1, 0), 0);
}

}  // namespace
}  // namespace kvbench
