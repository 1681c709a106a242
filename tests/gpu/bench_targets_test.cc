// cuda_bench's verdicts on issue #6's targets, from hand-made rows (no GPU).
#include "bench_targets.h"

#include <gtest/gtest.h>

#include <map>

namespace kvlane::test {
namespace {

// Every row the targets read, each meeting its target by a margin.
std::vector<BenchRow> AllMet() {
  std::vector<BenchRow> rows;
  for (const char* size : {"256MiB", "1GiB"})
    for (const char* op : {"write", "read"})
      for (const char* lanes : {"one-lane", "striped"})
        rows.push_back({std::string(size) + " " + op + " " + lanes + " GB/s", 390, 393, "GB/s"});
  for (const char* op : {"write", "read"}) {
    rows.push_back({std::string("4KiB ") + op + " p50 us", 3.6, 10, "us"});
    rows.push_back({std::string("4KiB ") + op + " p99 us", 4.5, 16, "us"});
    rows.push_back({std::string("2MiB ") + op + " p50 us", 14, 14, "us"});
    rows.push_back({std::string("2MiB ") + op + " p99 us", 15, 15, "us"});
    rows.push_back(
        {std::string("6146x37440B ") + op + " GB/s (vs kvlane contig)", 360, 370, "GB/s"});
    rows.push_back({std::string("6146x37440B ") + op + " ns/desc (vs ref contig)", 104, 95, "ns"});
  }
  rows.push_back({"4KiB WRITE beside 2MiB: p99 us (vs solo p99)", 4.8, 4.5, "us"});
  rows.push_back({"2MiB bulk lane GB/s beside 4KiB (vs solo)", 380, 390, "GB/s"});
  return rows;
}

std::map<std::string, TargetVerdict> ByTarget(const std::vector<TargetVerdict>& v) {
  std::map<std::string, TargetVerdict> m;
  for (const TargetVerdict& t : v) m[t.target] = t;
  return m;
}

TEST(BenchTargets, EveryTargetIsCheckedAndMetWhenTheRowsMeetIt) {
  const auto v = CheckTargets(AllMet());
  EXPECT_EQ(v.size(), 8u + 4u + 2u + 4u + 2u);
  for (const TargetVerdict& t : v) {
    EXPECT_TRUE(t.met) << t.target << ": " << t.measured;
    EXPECT_FALSE(t.missing) << t.target;
  }
  EXPECT_EQ(PrintTargets(v, 2), 0);
}

TEST(BenchTargets, EachBoundIsAppliedOnItsSide) {
  std::vector<BenchRow> rows = AllMet();
  for (BenchRow& r : rows) {
    if (r.metric == "1GiB read striped GB/s") r.kvlane = 0.979 * r.reference;  // below 0.98
    if (r.metric == "4KiB write p50 us") r.kvlane = 4.01;
    if (r.metric == "4KiB read p99 us") r.kvlane = 5.0;  // at the bound: met
    if (r.metric == "2MiB write p99 us") r.kvlane = 1.06 * r.reference;
    if (r.metric == "2MiB read p50 us") r.kvlane = 0.5 * r.reference;  // faster: met
    if (r.metric == "4KiB WRITE beside 2MiB: p99 us (vs solo p99)") r.kvlane = 6.7;
    if (r.metric == "2MiB bulk lane GB/s beside 4KiB (vs solo)") r.kvlane = 0.9 * r.reference;
    if (r.metric == "6146x37440B write GB/s (vs kvlane contig)") r.kvlane = 0.94 * r.reference;
  }
  auto m = ByTarget(CheckTargets(rows));
  EXPECT_FALSE(m["1GiB read striped GB/s >= 0.98 x reference"].met);
  EXPECT_TRUE(m["1GiB read one-lane GB/s >= 0.98 x reference"].met);
  EXPECT_FALSE(m["4KiB write p50 <= 4 us"].met);
  EXPECT_TRUE(m["4KiB read p99 <= 5 us"].met);
  EXPECT_FALSE(m["2MiB write p99 <= 1.05 x reference"].met);
  EXPECT_TRUE(m["2MiB read p50 <= 1.05 x reference"].met);
  EXPECT_FALSE(m["4KiB WRITE beside 2MiB p99 <= 5 us"].met);
  EXPECT_FALSE(m["2MiB bulk lane beside 4KiB >= 0.95 x solo"].met);
  EXPECT_FALSE(m["6146x37440B write >= 0.95 x contiguous"].met);
  EXPECT_NE(m["6146x37440B write >= 0.95 x contiguous"].measured.find("104.0 ns/desc"),
            std::string::npos);
  EXPECT_EQ(PrintTargets(CheckTargets(rows), 1), 6);
}

TEST(BenchTargets, ARowNotMeasuredIsNeitherMetNorCountedAsUnmet) {
  std::vector<BenchRow> rows = AllMet();
  std::erase_if(rows, [](const BenchRow& r) { return r.metric == "4KiB read p50 us"; });
  rows.push_back({"256MiB write one-lane GB/s", 1, 0, "GB/s"});  // a duplicate: the first counts
  auto m = ByTarget(CheckTargets(rows));
  EXPECT_TRUE(m["4KiB read p50 <= 4 us"].missing);
  EXPECT_FALSE(m["4KiB read p50 <= 4 us"].met);
  EXPECT_TRUE(m["256MiB write one-lane GB/s >= 0.98 x reference"].met);
  EXPECT_EQ(PrintTargets(CheckTargets(rows), 2), 0);
  EXPECT_EQ(PrintTargets(CheckTargets({}), 2), 0);
}

}  // namespace
}  // namespace kvlane::test
