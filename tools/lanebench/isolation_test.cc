// The isolation ratio from a hand-built document's cases.
#include "isolation.h"

#include <gtest/gtest.h>

#include <cmath>

namespace lanebench {
namespace {

// A case whose arms hold `key` in their medians and p99_unstalled_us in their tail:
// baseline `b`, candidate `c`.
Doc CaseWith(const char* id, const char* key, double b, double c, double bu, double cu) {
  Doc d = {{"id", id}};
  d["arms"][kBaseline] = {{"median", {{key, b}}}, {"tail", {{"p99_unstalled_us", bu}}}};
  d["arms"][kCandidate] = {{"median", {{key, c}}}, {"tail", {{"p99_unstalled_us", cu}}}};
  return d;
}

Doc Cases() {
  return Doc::array({CaseWith("mixed-write", "small_p99_us", 300, 120, 90, 60),
                     CaseWith("single-read-4KiB", "p99_us", 1000, 1000, 1000, 1000),
                     CaseWith("single-write-4KiB", "p99_us", 100, 80, 45, 40)});
}

// Each arm's mixed small p99 over the same arm's control p99 (not the other arm's,
// not another single case's).
TEST(Isolation, EachArmsMixedSmallP99OverItsOwnControlsP99) {
  const Doc iso = Isolation("mixed-write", "single-write-4KiB", Cases());
  ASSERT_EQ(iso.size(), 2u);
  EXPECT_EQ(iso[0]["arm"], kBaseline);
  EXPECT_EQ(iso[1]["arm"], kCandidate);
  EXPECT_EQ(iso[0]["single_case"], "single-write-4KiB");
  EXPECT_DOUBLE_EQ(iso[0]["ratio"].get<double>(), 3.0);
  EXPECT_DOUBLE_EQ(iso[1]["ratio"].get<double>(), 1.5);
  EXPECT_EQ(iso[1]["mixed_small_p99_us"].get<double>(), 120);
  EXPECT_EQ(iso[1]["single_p99_us"].get<double>(), 80);
  EXPECT_DOUBLE_EQ(iso[0]["ratio_unstalled"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(iso[1]["ratio_unstalled"].get<double>(), 1.5);
}

TEST(Isolation, NoEntryWithoutBothCases) {
  EXPECT_TRUE(Isolation("mixed-write", "single-write-8KiB", Cases()).empty());
  EXPECT_TRUE(Isolation("mixed-read", "single-write-4KiB", Cases()).empty());
}

}  // namespace
}  // namespace lanebench
