// The document built from hand-made run records: what each arm pools, and the
// isolation ratio over it.
#include "document.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

namespace lanebench {
namespace {

using nlohmann::json;

std::vector<double> OneTo(int n, double scale) {
  std::vector<double> v(n);
  std::iota(v.begin(), v.end(), 1.0);
  for (double& x : v) x *= scale;
  return v;
}

json Valid(json r) {
  r["ok"] = true;
  r["iterations"] = 100;
  r["verified"] = 100;
  return r;
}

json MixedResult(double scale) {
  return Valid({{"lat_us", {{"small", OneTo(100, scale)}, {"bulk", OneTo(100, 10)}}},
                {"window_us", OneTo(100, 10)}});
}

json SingleResult(double scale) { return Valid({{"lat_us", {{"xfer", OneTo(100, scale)}}}}); }

BenchConfig Config() {
  BenchConfig cfg;
  cfg.pairs = 2;
  cfg.pin = "off";
  return cfg;
}

std::vector<Case> Cases(const BenchConfig& cfg) {
  std::vector<Case> all = BuildCases(cfg);
  return {all[0], all[1]};  // mixed-write and its control, single-write-4KiB
}

// Candidate: mixed small 1..100 in pair 0 and 3..300 in pair 1 (run p99s 99 and
// 297: median 198); control 1..100 in both (p99 99 each). Baseline: the same, but its
// pair 1 mixed run is invalid (ok false) and huge: none of it may count.
std::vector<RunRecord> Records() {
  json invalid = MixedResult(1000);
  invalid["ok"] = false;
  return {{"mixed-write", kCandidate, 0, 0, MixedResult(1)},
          {"mixed-write", kCandidate, 1, 0, MixedResult(3)},
          {"single-write-4KiB", kCandidate, 0, 0, SingleResult(1)},
          {"single-write-4KiB", kCandidate, 1, 0, SingleResult(1)},
          {"mixed-write", kBaseline, 0, 1, MixedResult(1)},
          {"mixed-write", kBaseline, 1, 1, invalid},
          {"single-write-4KiB", kBaseline, 0, 1, SingleResult(1)},
          {"single-write-4KiB", kBaseline, 1, 1, SingleResult(1)}};
}

Doc Build() {
  const BenchConfig cfg = Config();
  return BuildDocument(cfg, Cases(cfg), Records(), "lanebench", Doc::object());
}

TEST(Document, EachArmPoolsItsValidRunsBesideTheMedianOfTheirValues) {
  const Doc d = Build();
  EXPECT_EQ(d["version"], 2);
  const Doc& cand = d["cases"][0]["arms"][kCandidate];
  EXPECT_EQ(cand["median"]["small_p99_us"].get<double>(), 198);
  // 200 samples, 1..100 and 3, 6, .., 300: p99 is the 198th smallest, the 3rd largest.
  EXPECT_EQ(cand["pooled"]["small_p99_us"].get<double>(), 294);
  EXPECT_EQ(cand["pooled"]["samples"].get<int>(), 200);
  const Doc& base = d["cases"][0]["arms"][kBaseline];
  EXPECT_EQ(base["pooled"]["small_p99_us"].get<double>(), 99) << "the invalid run counted";
  EXPECT_EQ(base["pooled"]["samples"].get<int>(), 100);
}

TEST(Document, TheIsolationRatioIsOverPooledSamplesWithItsPerPairSpread) {
  const Doc d = Build();
  ASSERT_EQ(d["isolation"].size(), 2u);
  const Doc& cand = d["isolation"][1];
  EXPECT_EQ(cand["arm"], kCandidate);
  // Pooled control: 1..100 twice, the 198th smallest is 99.
  EXPECT_DOUBLE_EQ(cand["ratio"].get<double>(), 294.0 / 99.0);
  EXPECT_EQ(cand["ratio_runs"], Doc::array({1.0, 3.0}));
  EXPECT_EQ(cand["ratio_min"].get<double>(), 1.0);
  EXPECT_EQ(cand["ratio_max"].get<double>(), 3.0);
  const Doc& base = d["isolation"][0];
  EXPECT_DOUBLE_EQ(base["ratio"].get<double>(), 1.0);
  EXPECT_TRUE(std::isnan(base["ratio_runs"][1].get<double>()));
}

// Per-run values come with whether each run counted.
TEST(Document, TableRowsSayWhichRunsAreValid) {
  const Doc d = Build();
  const Doc& row = d["table"][0];  // mixed-write, small p50
  EXPECT_EQ(row["baseline_runs_valid"], Doc::array({true, false}));
  EXPECT_EQ(row["candidate_runs_valid"], Doc::array({true, true}));
  EXPECT_EQ(row["baseline_runs"].size(), 2u) << "the invalid run's value is still listed";
}

// With no pair of cases for the ratio, the document says which one the plan lacks.
TEST(Document, AMissingIsolationCaseIsNamed) {
  EXPECT_FALSE(Build().contains("isolation_missing"));
  BenchConfig cfg = Config();
  cfg.small_bytes = 8192;
  Doc d = BuildDocument(cfg, BuildCases(cfg), {}, "lanebench", Doc::object());
  EXPECT_TRUE(d["isolation"].empty());
  EXPECT_EQ(d["isolation_missing"], "single-write-8KiB");
  cfg.shape = "single";
  d = BuildDocument(cfg, BuildCases(cfg), {}, "lanebench", Doc::object());
  EXPECT_EQ(d["isolation_missing"], "mixed-write");
  cfg.shape = "mixed";
  cfg.small_bytes = 4096;
  d = BuildDocument(cfg, BuildCases(cfg), {}, "lanebench", Doc::object());
  EXPECT_EQ(d["isolation_missing"], "single-write-4KiB");
}

}  // namespace
}  // namespace lanebench
