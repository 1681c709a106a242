// The isolation ratio from a hand-built document's cases.
#include "isolation.h"

#include <gtest/gtest.h>

#include <cmath>

namespace lanebench {
namespace {

Doc Run(int pair, bool valid, const char* key, double p99) {
  return {{"pair", pair}, {"valid", valid}, {"metrics", {{key, p99}}}};
}

// One arm: `key`'s value pooled over its valid runs, a median of the runs' own
// values that must not be used (999), the runs, and the tail's unstalled p99.
Doc Arm(const char* key, double pooled, int samples, Doc runs, double unstalled) {
  return {{"median", {{key, 999.0}}},
          {"pooled", {{key, pooled}, {"samples", samples}}},
          {"tail", {{"p99_unstalled_us", unstalled}}},
          {"runs", std::move(runs)}};
}

Doc Case(const char* id, Doc baseline, Doc candidate) {
  Doc d = {{"id", id}};
  d["arms"][kBaseline] = std::move(baseline);
  d["arms"][kCandidate] = std::move(candidate);
  return d;
}

Doc Cases() {
  const char* m = "small_p99_us";
  const char* s = "p99_us";
  return Doc::array(
      {Case("mixed-write",
            Arm(m, 300, 200, Doc::array({Run(0, true, m, 280), Run(1, false, m, 900)}), 90),
            Arm(m, 120, 200, Doc::array({Run(0, true, m, 100), Run(1, true, m, 150)}), 60)),
       Case("single-read-4KiB", Arm(s, 1000, 200, Doc::array(), 1000),
            Arm(s, 1000, 200, Doc::array(), 1000)),
       Case("single-write-4KiB",
            Arm(s, 100, 200, Doc::array({Run(0, true, s, 100), Run(1, true, s, 90)}), 45),
            Arm(s, 80, 100, Doc::array({Run(0, true, s, 50), Run(1, true, s, 100)}), 40))});
}

// Each arm's pooled mixed small p99 over the same arm's pooled control p99 (not the
// other arm's, not another single case's, not the medians of the runs' values).
TEST(Isolation, EachArmsPooledMixedSmallP99OverItsOwnControls) {
  const Doc iso = Isolation("mixed-write", "single-write-4KiB", Cases());
  ASSERT_EQ(iso.size(), 2u);
  EXPECT_EQ(iso[0]["arm"], kBaseline);
  EXPECT_EQ(iso[1]["arm"], kCandidate);
  EXPECT_EQ(iso[0]["single_case"], "single-write-4KiB");
  EXPECT_DOUBLE_EQ(iso[0]["ratio"].get<double>(), 3.0);
  EXPECT_DOUBLE_EQ(iso[1]["ratio"].get<double>(), 1.5);
  EXPECT_EQ(iso[1]["mixed_small_p99_us"].get<double>(), 120);
  EXPECT_EQ(iso[1]["single_p99_us"].get<double>(), 80);
  EXPECT_EQ(iso[1]["mixed_samples"].get<int>(), 200);
  EXPECT_EQ(iso[1]["single_samples"].get<int>(), 100);
  EXPECT_DOUBLE_EQ(iso[0]["ratio_unstalled"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(iso[1]["ratio_unstalled"].get<double>(), 1.5);
}

// Per pair: each run's own p99s within one process pair; an invalid run's pair has none.
TEST(Isolation, ThePerPairSpreadIsBesideTheRatio) {
  const Doc iso = Isolation("mixed-write", "single-write-4KiB", Cases());
  ASSERT_EQ(iso.size(), 2u);
  const Doc& base = iso[0]["ratio_runs"];
  ASSERT_EQ(base.size(), 2u);
  EXPECT_DOUBLE_EQ(base[0].get<double>(), 2.8);
  EXPECT_TRUE(std::isnan(base[1].get<double>())) << "pair 1's mixed run is invalid";
  EXPECT_DOUBLE_EQ(iso[0]["ratio_min"].get<double>(), 2.8);
  EXPECT_DOUBLE_EQ(iso[0]["ratio_max"].get<double>(), 2.8);
  EXPECT_EQ(iso[1]["ratio_runs"], Doc::array({2.0, 1.5}));
  EXPECT_DOUBLE_EQ(iso[1]["ratio_min"].get<double>(), 1.5);
  EXPECT_DOUBLE_EQ(iso[1]["ratio_max"].get<double>(), 2.0);
}

TEST(Isolation, NoEntryWithoutBothCases) {
  EXPECT_TRUE(Isolation("mixed-write", "single-write-8KiB", Cases()).empty());
  EXPECT_TRUE(Isolation("mixed-read", "single-write-4KiB", Cases()).empty());
}

}  // namespace
}  // namespace lanebench
