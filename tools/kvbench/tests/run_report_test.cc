#include "run_report.h"

#include <gtest/gtest.h>

namespace kvbench {
namespace {

RowResult Row(const std::string& op, Verdict v) {
  RowResult r;
  r.op = op;
  r.isl = 8192;
  r.batch = 1;
  r.verdict = v;
  r.verify_detail = "detail";
  return r;
}

TEST(RunReport, AllPassIsValid) {
  RunResult result;
  result.rows = {Row("pull", Verdict::kPass), Row("push", Verdict::kPass)};
  EXPECT_TRUE(InvalidReasons(result).empty());
}

TEST(RunReport, FailedAndUnverifiedRowsMakeTheRunInvalid) {
  RunResult result;
  result.rows = {Row("pull", Verdict::kPass), Row("push", Verdict::kFail),
                 Row("pull", Verdict::kNoVerifier)};
  std::vector<std::string> reasons = InvalidReasons(result);
  ASSERT_EQ(reasons.size(), 2u);
  EXPECT_NE(reasons[0].find("fail"), std::string::npos);
  EXPECT_NE(reasons[1].find("no-verifier"), std::string::npos);
}

TEST(RunReport, RunErrorsAndEmptyRunsAreInvalid) {
  RunResult result;
  EXPECT_EQ(InvalidReasons(result).size(), 1u);  // no row was measured
  result.rows = {Row("pull", Verdict::kPass)};
  result.errors = {"peer connection failed"};
  EXPECT_EQ(InvalidReasons(result), std::vector<std::string>{"peer connection failed"});
}

TEST(RunReport, ProgressLineNamesTheRow) {
  std::string line = ProgressLine(Row("push", Verdict::kPass));
  EXPECT_NE(line.find("push"), std::string::npos);
  EXPECT_NE(line.find("8192"), std::string::npos);
  EXPECT_NE(line.find("verified pass"), std::string::npos);
}

}  // namespace
}  // namespace kvbench
