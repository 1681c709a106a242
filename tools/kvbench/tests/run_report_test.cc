#include "run_report.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "session_pair.h"

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

namespace fs = std::filesystem;

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

CaseDocument DocWithRows(size_t rows) {
  CaseDocument doc;
  doc.case_name = "kv-dsv4-b256-shm";
  doc.workload = nlohmann::json::object();
  doc.implementation = nlohmann::json::object();
  for (size_t i = 0; i < rows; ++i) doc.rows.push_back(Row("pull", Verdict::kPass));
  return doc;
}

// A stopped run's table is headed PARTIAL RESULT and ends with the rows it lacks;
// its outcome is over the rows it holds.
TEST(RunReport, APartialRunsTableSaysSo) {
  CaseDocument doc = DocWithRows(1);
  doc.completeness = CompletenessOf({{"pull", 8192, 1}, {"push", 8192, 1}, {"pull", 8192, 2}},
                                    doc.rows, "SIGTERM", "target");
  std::ostringstream out;
  PrintSummaryTable(doc, out);
  const std::string text = out.str();
  EXPECT_NE(text.find("PARTIAL RESULT, not a full run: stopped by SIGTERM on the target after 1 "
                      "of 3 rows\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("not measured (neither failed nor verified): push isl 8192 batch 1, pull "
                      "isl 8192 batch 2\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("outcome: valid (over the rows measured)\n"), std::string::npos) << text;
  std::ostringstream whole;
  PrintSummaryTable(DocWithRows(1), whole);
  EXPECT_EQ(whole.str().find("PARTIAL"), std::string::npos) << whole.str();
}

// A second run into the same --out replaces the first's document whole and says
// so; no temporary file is left beside it.
TEST(RunReport, WriteDocumentSaysWhenItReplacedOne) {
  const fs::path dir = fs::temp_directory_path() / ("kvbench_doc_" + std::to_string(getpid()));
  fs::remove_all(dir);
  auto first = WriteDocument(DocWithRows(1), dir.string());
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_FALSE(first->replaced);
  EXPECT_EQ(first->path, (dir / "kv-dsv4-b256-shm.json").string());
  auto second = WriteDocument(DocWithRows(2), dir.string());
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_TRUE(second->replaced);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);
  EXPECT_EQ(nlohmann::json::parse(ReadFile(second->path))["rows"].size(), 2u);
  fs::remove_all(dir);
}

// A write that fails partway (here: the file size limit, as a full disk would)
// reports the failure and leaves the earlier document as it was, not truncated.
TEST(RunReport, AFailedWriteLeavesTheEarlierDocumentWhole) {
  const fs::path dir = fs::temp_directory_path() / ("kvbench_doc_fail_" + std::to_string(getpid()));
  fs::remove_all(dir);
  auto first = WriteDocument(DocWithRows(1), dir.string());
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  const std::string before = ReadFile(first->path);
  const CaseDocument big = DocWithRows(400);
  ASSERT_GT(DumpCompact(DocumentToJson(big)).size(), 64u << 10);
  rlimit saved{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &saved), 0);
  rlimit small = saved;
  small.rlim_cur = 16 << 10;
  auto old_handler = signal(SIGXFSZ, SIG_IGN);  // write(2) fails with EFBIG instead
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  auto second = WriteDocument(big, dir.string());
  setrlimit(RLIMIT_FSIZE, &saved);
  signal(SIGXFSZ, old_handler);
  EXPECT_FALSE(second.ok());
  const std::string after = ReadFile(first->path);
  EXPECT_TRUE(after == before) << "the earlier document changed: " << before.size() << " B before, "
                               << after.size() << " B after";
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);
  fs::remove_all(dir);
}

// An --out that cannot hold the document is found before the run, not after it:
// below a regular file, or a directory without write permission.
TEST(RunReport, OutputDirIsCheckedBeforeTheRun) {
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

// The initiator's grid and ops name its case; a ladder the preset measures too, in
// any order, and both ops in either order, do not (session_pair.h adds --isl 8192
// --batches 1 where the flags give no ladder).
TEST(RunReport, TheCaseNamesTheGridAndTheOps) {
  struct Named {
    std::vector<std::string> flags;
    std::string name;
  };
  for (const Named& n : std::vector<Named>{
           {{"--ops", "push,pull", "--isl", "32768,8192", "--batches", "4,1,2"},
            "kv-dsv4-b256-tcp"},
           {{"--ops", "pull", "--batches", "2,1"}, "kv-dsv4-b256-tcp-isl8k-b1_2-pull"},
           {{"--grid", "full", "--ops", "push"}, "kv-dsv4-b256-tcp-full-isl8k-b1-push"}}) {
    std::vector<std::string> flags = {"--transport", "tcp"};
    flags.insert(flags.end(), n.flags.begin(), n.flags.end());
    testing::SessionPair pair = testing::OpenBoth(flags, flags);
    ASSERT_TRUE(pair.initiator.ok()) << pair.initiator.status().message();
    EXPECT_EQ(CaseName(*pair.initiator.value()), n.name);
  }
}

}  // namespace
}  // namespace kvbench
