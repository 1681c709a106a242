// Percentile and Median against hand-counted answers.
#include "stats.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numeric>

namespace lanebench {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// 1, 2, ..., n in reverse: the order must not matter.
std::vector<double> OneTo(int n) {
  std::vector<double> v(n);
  std::iota(v.rbegin(), v.rend(), 1.0);
  return v;
}

TEST(Percentile, NearestRankOfOneToN) {
  EXPECT_EQ(Percentile(OneTo(100), 50), 50);
  EXPECT_EQ(Percentile(OneTo(100), 99), 99) << "p99 of 100 is the 99th smallest";
  EXPECT_EQ(Percentile(OneTo(100), 100), 100);
  EXPECT_EQ(Percentile(OneTo(300), 99), 297) << "pooled runs: the 4th largest of 300";
  EXPECT_EQ(Percentile(OneTo(10), 99), 10) << "ceil(9.9) = 10";
  EXPECT_EQ(Percentile(OneTo(10), 50), 5);
  EXPECT_EQ(Percentile(OneTo(10), 1), 1);
  EXPECT_EQ(Percentile({7}, 99), 7);
  EXPECT_TRUE(std::isnan(Percentile({}, 50)));
}

TEST(Median, MiddleOrMeanOfTheTwoMiddle) {
  EXPECT_EQ(Median({3, 1, 2}), 2);
  EXPECT_EQ(Median({4, 1, 3, 2}), 2.5);
  EXPECT_EQ(Median({5}), 5);
  EXPECT_TRUE(std::isnan(Median({})));
}

// A NaN (a run whose every iteration stalled) in the sort gave an answer that
// depended on where it stood: Median({NaN, 30, 10}) was 10, Median({30, NaN, 10}) 30.
TEST(Median, NonFiniteValuesAreLeftOutWhereverTheyStand) {
  for (const std::vector<double>& v :
       {std::vector<double>{kNaN, 30, 10}, {30, kNaN, 10}, {10, 30, kNaN}, {kInf, 10, 30, -kInf}})
    EXPECT_EQ(Median(v), 20) << v[0] << " " << v[1] << " " << v[2];
  EXPECT_TRUE(std::isnan(Median({kNaN, kNaN})));
}

TEST(Percentile, NonFiniteValuesAreLeftOutWhereverTheyStand) {
  std::vector<double> v = OneTo(100);
  for (size_t at : {size_t{0}, size_t{37}, size_t{99}}) {
    std::vector<double> with = v;
    with.insert(with.begin() + static_cast<std::ptrdiff_t>(at), kNaN);
    with.insert(with.begin(), kInf);
    EXPECT_EQ(Percentile(with, 99), 99) << "NaN at " << at;
    EXPECT_EQ(Percentile(with, 50), 50) << "NaN at " << at;
  }
  EXPECT_TRUE(std::isnan(Percentile({kNaN}, 50)));
}

}  // namespace
}  // namespace lanebench
