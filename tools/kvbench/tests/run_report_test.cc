#include "run_report.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

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

// An --out that cannot hold the document is found before the run, not after it:
// below a regular file, or a directory without write permission.
TEST(RunReport, OutputDirIsCheckedBeforeTheRun) {
  namespace fs = std::filesystem;
  const fs::path base = fs::temp_directory_path() / ("kvbench_out_" + std::to_string(getpid()));
  fs::remove_all(base);
  fs::create_directories(base);
  EXPECT_TRUE(CheckOutputDir((base / "new" / "dir").string()).ok());
  EXPECT_FALSE(fs::exists(base / "new"));  // what the check created is gone again
  fs::create_directories(base / "old");
  EXPECT_TRUE(CheckOutputDir((base / "old").string()).ok());
  EXPECT_TRUE(fs::is_empty(base / "old"));  // the probe file is gone
  std::ofstream(base / "file") << "x";
  kvlane::Status s = CheckOutputDir((base / "file" / "sub").string());
  EXPECT_EQ(s.code(), kvlane::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("--out "), std::string::npos) << s.message();
  if (geteuid() != 0) {  // root writes anywhere
    fs::create_directories(base / "ro");
    fs::permissions(base / "ro", fs::perms::owner_read | fs::perms::owner_exec);
    EXPECT_FALSE(CheckOutputDir((base / "ro").string()).ok());
    fs::permissions(base / "ro", fs::perms::owner_all);
  }
  fs::remove_all(base);
}

}  // namespace
}  // namespace kvbench
