// The tail summary from hand-built run records with known answers.
#include "tail.h"

#include <gtest/gtest.h>

#include <cmath>

namespace lanebench {
namespace {

using nlohmann::json;
using Doc = nlohmann::ordered_json;

Case Single() {
  Case c;
  c.id = "single-write-4KiB";
  c.shape = "single";
  return c;
}

json Result(std::vector<double> lat, std::vector<double> stall, std::vector<double> post,
            json host_stalls) {
  const auto n = static_cast<int64_t>(lat.size());
  json r = {{"ok", true},
            {"iterations", n},
            {"verified", n},
            {"lat_us", {{"xfer", lat}}},
            {"stall_us", {{"xfer", stall}}},
            {"post_us", {{"xfer", post}}}};
  if (!host_stalls.is_null()) r["host_stalls"] = host_stalls;
  return r;
}

// Run 1: median 10, so 30 (its poller stalled 6 us) and 50 (its Post() took 7 us) are
// slow. Run 2: median 10, 25 slow for neither reason (20, twice the median, is not
// over it). Run 3 is invalid and run 4
// another arm's: neither counts, whatever they hold.
std::vector<RunRecord> Records() {
  const json slow = Result({900, 900}, {0, 0}, {0, 0}, nullptr);
  json invalid = slow;
  invalid["ok"] = false;
  return {
      {"single-write-4KiB", kCandidate, 0, 0,
       Result({10, 10, 10, 10, 30, 50}, {0, 0, 0, 0, 6, 0}, {0, 0, 0, 0, 0, 7},
              {{"spin_ms", 100}, {"over_5us", 10}, {"over_10us", 5}, {"stalled_pct", 1}})},
      {"single-write-4KiB", kCandidate, 1, 1,
       Result({10, 10, 10, 20, 25}, {0, 0, 0, 0, 0}, {0, 0, 0, 0, 0},
              {{"spin_ms", 200}, {"over_5us", 40}, {"over_10us", 10}, {"stalled_pct", 3}})},
      {"single-write-4KiB", kCandidate, 2, 0, invalid},
      {"single-write-4KiB", kBaseline, 0, 1, slow},
  };
}

TEST(TailDoc, CountsSlowIterationsOfValidRunsOfTheArmByCause) {
  const Doc t = TailDoc(Single(), kCandidate, Records());
  EXPECT_EQ(t["watched"], "xfer");
  EXPECT_EQ(t["measured"].get<int64_t>(), 11);
  EXPECT_EQ(t["slow"].get<int64_t>(), 3);
  EXPECT_EQ(t["slow_stalled"].get<int64_t>(), 1);
  EXPECT_EQ(t["slow_post"].get<int64_t>(), 1);
  EXPECT_EQ(t["slow_other"].get<int64_t>(), 1);
}

TEST(TailDoc, HostStallsAreMediansOfEachRunsRates) {
  const Doc t = TailDoc(Single(), kCandidate, Records());
  EXPECT_EQ(t["host_stalls_5us_per_s"].get<double>(), 150);  // 100/s and 200/s
  EXPECT_EQ(t["host_stalls_10us_per_s"].get<double>(), 50);  // 50/s both
  EXPECT_EQ(t["host_stalled_pct"].get<double>(), 2);         // 1 % and 3 %
}

// Run 1 without its stalled 30: {10, 10, 10, 10, 50}, p99 50; run 2: {10, 10, 10,
// 20, 25}, p99 25. Pooled, as the isolation ratio's p99: the 10th smallest of 10,
// 50 (the median of the runs' own values would be 37.5).
TEST(TailDoc, UnstalledP99LeavesOutStalledIterationsPooledOverRuns) {
  const Doc t = TailDoc(Single(), kCandidate, Records());
  EXPECT_EQ(t["p99_unstalled_runs"], Doc::array({50.0, 25.0}));
  EXPECT_EQ(t["p99_unstalled_us"].get<double>(), 50);
  EXPECT_EQ(UnstalledP99("single", Records()[0].result), 50);
}

TEST(TailDoc, NoValidRunIsNothingMeasured) {
  const Doc t = TailDoc(Single(), kCandidate, {Records()[2]});
  EXPECT_EQ(t["measured"].get<int64_t>(), 0);
  EXPECT_TRUE(std::isnan(t["p99_unstalled_us"].get<double>()));
  EXPECT_TRUE(std::isnan(t["host_stalls_5us_per_s"].get<double>()));
}

}  // namespace
}  // namespace lanebench
