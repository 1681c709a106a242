// The printed report from hand-made documents: what a reader sees when values are missing.
#include "report.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>

namespace lanebench {
namespace {

std::string Render(const Doc& doc) {
  char* buf = nullptr;
  size_t len = 0;
  std::FILE* out = open_memstream(&buf, &len);
  PrintResults(doc, out);
  std::fclose(out);
  std::string s(buf, len);
  std::free(buf);
  return s;
}

// One single-shape case whose runs all failed and had no host-stall probe: every
// number of the tail and the isolation ratio is missing (NaN, stored as null).
Doc NothingMeasured() {
  Doc tail = {{"measured", 0},
              {"slow", 0},
              {"host_stalls_5us_per_s", NAN},
              {"host_stalls_10us_per_s", NAN},
              {"host_stalled_pct", NAN}};
  Doc arm = {{"median", Doc::object()}, {"tail", tail}, {"runs", Doc::array()}};
  Doc iso = {{"arm", "independent"},
             {"mixed_small_p99_us", NAN},
             {"single_case", "single-write-4KiB"},
             {"single_p99_us", NAN},
             {"ratio", NAN},
             {"mixed_small_p99_unstalled_us", NAN},
             {"single_p99_unstalled_us", NAN},
             {"ratio_unstalled", NAN}};
  return {
      {"baseline", "global-fifo"},
      {"candidate", "independent"},
      {"environment", {{"loadavg_end", "0 0 0"}}},
      {"cases", {{{"id", "single-write-4KiB"}, {"arms", {{"independent", arm}}}}}},
      {"table", Doc::array()},
      {"isolation", {iso}},
      {"verification",
       {{"verified_iterations", 0}, {"measured_iterations", 0}, {"valid_runs", 0}, {"runs", 1}}},
      {"outcome", "invalid"}};
}

TEST(Report, MissingValueIsNaAloneWithoutItsUnit) {
  const std::string text = Render(Doc::parse(NothingMeasured().dump()));  // NaN -> null
  EXPECT_NE(text.find("host stalls n/a, n/a, n/a"), std::string::npos) << text;
  EXPECT_NE(text.find("= n/a\n"), std::string::npos) << text;
  for (const char* glued : {"n/ax", "n/a/s", "n/a%"})
    EXPECT_EQ(text.find(glued), std::string::npos) << glued << " in:\n" << text;
}

TEST(Report, PresentValueKeepsItsUnit) {
  Doc doc = NothingMeasured();
  doc["cases"][0]["arms"]["independent"]["tail"]["host_stalls_5us_per_s"] = 1000.0;
  doc["cases"][0]["arms"]["independent"]["tail"]["host_stalled_pct"] = 1.0;
  doc["isolation"][0]["ratio"] = 1.25;
  const std::string text = Render(doc);
  EXPECT_NE(text.find("host stalls 1000.0/s, n/a, 1.000%"), std::string::npos) << text;
  EXPECT_NE(text.find("= 1.250x   (0 / 0 samples; per pair n/a..n/a)\n"), std::string::npos)
      << text;
}

// The ratio over pooled samples, and beside it how many and the per-pair spread.
TEST(Report, TheIsolationRatioSaysWhatItStandsOn) {
  Doc doc = NothingMeasured();
  Doc& iso = doc["isolation"][0];
  iso["mixed_small_p99_us"] = 294.0;
  iso["single_p99_us"] = 99.0;
  iso["ratio"] = 294.0 / 99.0;
  iso["mixed_samples"] = 200;
  iso["single_samples"] = 200;
  iso["ratio_min"] = 1.0;
  iso["ratio_max"] = 3.0;
  const std::string text = Render(doc);
  EXPECT_NE(text.find("each over the arm's valid runs pooled"), std::string::npos) << text;
  EXPECT_NE(text.find("  independent       294.0 /     99.0 = 2.970x   (200 / 200 samples; per "
                      "pair 1.000x..3.000x)\n"),
            std::string::npos)
      << text;
}

// A run that did not verify is listed with its values (they are data) but marked:
// it is not in the medians beside it.
TEST(Report, AnInvalidRunIsMarkedInThePerRunValues) {
  Doc doc = NothingMeasured();
  doc["table"] = Doc::array({{{"case", "single-write-4KiB"},
                              {"metric", "p99 [us]"},
                              {"baseline", 1.5},
                              {"candidate", 2.0},
                              {"change_pct", 33.3},
                              {"baseline_runs", {1.0, 2.0}},
                              {"candidate_runs", {2.0, 3.0}},
                              {"baseline_runs_valid", {true, false}},
                              {"candidate_runs_valid", {true, true}}}});
  std::string text = Render(doc);
  EXPECT_NE(text.find("   1.000 2.000* | 2.000 3.000\n"), std::string::npos) << text;
  EXPECT_NE(text.find("* an invalid run"), std::string::npos) << text;
  doc["table"][0]["baseline_runs_valid"] = {true, true};
  text = Render(doc);
  EXPECT_EQ(text.find('*'), std::string::npos) << "every run valid: no mark\n" << text;
}

// The isolation section used to vanish silently when the plan lacked its control.
TEST(Report, AMissingIsolationCaseIsSaid) {
  Doc doc = NothingMeasured();
  doc["isolation"] = Doc::array();
  doc["isolation_missing"] = "single-write-8KiB";
  EXPECT_NE(Render(doc).find("\nisolation: no single-write-8KiB case in this run\n"),
            std::string::npos)
      << Render(doc);
}

// A stopped run's document (MarkStopped) reads as partial before the tables and in
// its outcome line; a complete one says neither.
TEST(Report, AStoppedRunSaysItIsPartial) {
  Doc doc = NothingMeasured();
  EXPECT_EQ(Render(doc).find("PARTIAL"), std::string::npos);
  doc["verification"]["runs_planned"] = 12;
  doc["outcome"] = "stopped";
  doc["complete"] = false;
  doc["stopped_by"] = "SIGINT";
  const std::string text = Render(doc);
  EXPECT_EQ(text.find("\nPARTIAL RESULT, not a full run: stopped by SIGINT after 1 of 12 runs"), 0u)
      << text;
  EXPECT_NE(text.find("outcome: stopped (incomplete: stopped by SIGINT)\n"), std::string::npos)
      << text;
}

}  // namespace
}  // namespace lanebench
