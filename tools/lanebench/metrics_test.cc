// One run's metrics from hand-built results with known answers.
#include "metrics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <vector>

namespace lanebench {
namespace {

using nlohmann::json;

// `scale` x (n, n - 1, ..., 1): out of order on purpose.
std::vector<double> Down(int n, double scale = 1) {
  std::vector<double> v(n);
  std::iota(v.rbegin(), v.rend(), 1.0);
  for (double& x : v) x *= scale;
  return v;
}

Case Mixed() {
  Case c;
  c.id = "mixed-write";
  c.shape = "mixed";
  c.bytes = (2u << 20) + 4096;
  return c;
}

Case Single() {
  Case c;
  c.id = "single-write-4KiB";
  c.shape = "single";
  c.bytes = 4096;
  return c;
}

TEST(RunMetrics, SingleIsTheTransfersNearestRankP50AndP99) {
  const Doc m = RunMetrics(Single(), json{{"lat_us", {{"xfer", Down(100)}}}});
  EXPECT_EQ(m["p50_us"].get<double>(), 50);
  EXPECT_EQ(m["p99_us"].get<double>(), 99);
  const Doc none = RunMetrics(Single(), json::object());
  EXPECT_TRUE(std::isnan(none["p99_us"].get<double>()));
}

TEST(RunMetrics, MixedTakesEachTransferItsOwnSeries) {
  const json result = {{"lat_us", {{"small", Down(100)}, {"bulk", Down(100, 10)}}},
                       {"window_us", Down(100, 2)},
                       {"done_sweep", {{"small", {0, 0, 0, 2}}, {"bulk", {1, 1, 0, 1}}}}};
  const Doc m = RunMetrics(Mixed(), result);
  EXPECT_EQ(m["small_p50_us"].get<double>(), 50);
  EXPECT_EQ(m["small_p99_us"].get<double>(), 99);
  EXPECT_EQ(m["bulk_p50_us"].get<double>(), 500);
  EXPECT_EQ(m["bulk_p99_us"].get<double>(), 990);
  EXPECT_EQ(m["window_p50_us"].get<double>(), 100);
  // (2 MiB + 4 KiB) / 100 us = 2101248 B / 100 us = 21.01248 GB/s (decimal).
  EXPECT_DOUBLE_EQ(m["window_gbps"].get<double>(), 21.01248);
  EXPECT_EQ(m["small_first_pct"].get<double>(), 50);
  std::vector<std::string> keys;
  for (const auto& [k, v] : m.items()) keys.push_back(k);
  std::vector<std::string> defs;
  for (const MetricDef& d : MetricDefs("mixed")) defs.push_back(d.key);
  EXPECT_EQ(keys, defs) << "every metric of the table, in its order";
}

// Done first: strictly earlier sweeps only. Here small is earlier in 2 of 4
// iterations, the same sweep in 1, later in 1: 50 %, not 25 % (later) or 75 % (<=).
TEST(SmallFirstPct, CountsOnlyStrictlyEarlierSweeps) {
  EXPECT_EQ(SmallFirstPct({{"done_sweep", {{"small", {0, 0, 0, 2}}, {"bulk", {1, 1, 0, 1}}}}}), 50);
  EXPECT_EQ(SmallFirstPct({{"done_sweep", {{"small", {0, 0}}, {"bulk", {0, 0}}}}}), 0)
      << "global-fifo: seen in the same sweep";
  EXPECT_EQ(SmallFirstPct({{"done_sweep", {{"small", {3}}, {"bulk", {7}}}}}), 100);
}

TEST(SmallFirstPct, MissingOrUnequalSeriesAreNaN) {
  EXPECT_TRUE(std::isnan(SmallFirstPct(json::object())));
  EXPECT_TRUE(std::isnan(SmallFirstPct({{"done_sweep", {{"small", {0}}}}})));
  EXPECT_TRUE(std::isnan(SmallFirstPct({{"done_sweep", {{"small", {0, 1}}, {"bulk", {1}}}}})));
  EXPECT_TRUE(std::isnan(
      SmallFirstPct({{"done_sweep", {{"small", json::array()}, {"bulk", json::array()}}}})));
}

// Pooled: every series end to end, in the order the runs came; RunMetrics over it
// takes each percentile over all the runs' iterations together.
TEST(PoolSeries, AppendsEverySeriesOfEachRun) {
  json pooled = json::object();
  PoolSeries({{"lat_us", {{"xfer", {1, 2}}}}, {"window_us", {5}}, {"ok", true}}, &pooled);
  PoolSeries({{"lat_us", {{"xfer", {3}}, {"other", {9}}}}, {"gap_us", {-1}}}, &pooled);
  EXPECT_EQ(pooled, (json{{"lat_us", {{"xfer", {1, 2, 3}}, {"other", {9}}}},
                          {"window_us", {5}},
                          {"gap_us", {-1}}}));
  json three = json::object();
  for (double scale : {1.0, 2.0, 3.0})
    PoolSeries({{"lat_us", {{"xfer", Down(100, scale)}}}}, &three);
  // 300 samples: p99 is the 297th smallest, the 4th largest (300, 297, 294, 291, ...).
  EXPECT_EQ(RunMetrics(Single(), three)["p99_us"].get<double>(), 291);
}

}  // namespace
}  // namespace lanebench
