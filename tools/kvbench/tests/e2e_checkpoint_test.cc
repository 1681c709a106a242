// End to end: the initiator writes its document after every row that finished
// (a checkpoint), so that a run killed outright keeps its finished rows. The run's
// second row is made endless by a testing fault (--inject-fault slow-reference);
// the test waits until the document on disk shows the first row, kills the
// initiator with SIGKILL (no clean-up runs) and reads what is left.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/sanitizer_reports.h"  // a rank's report fails the test
#include "kvbench_process.h"
#include "stopped_run.h"

namespace {

namespace fs = std::filesystem;
using kvbench::testing::Dirs;
using kvbench::testing::EndsOrKill;
using kvbench::testing::OnlyDocument;
using kvbench::testing::ReadFile;
using kvbench::testing::StartKvbench;

// The document at `path` when it holds at least one row; nullopt otherwise.
std::optional<nlohmann::json> DocumentWithARow(const fs::path& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  nlohmann::json doc = nlohmann::json::parse(in, nullptr, false);
  if (!doc.is_object() || !doc["rows"].is_array() || doc["rows"].empty()) return std::nullopt;
  return doc;
}

// Waits up to `limit` for `path` to be a document holding at least one row; that
// document, or nullopt when none came. Gives up at once when the initiator's stderr
// `log` says the second row's reference is stuck: the first row's checkpoint came
// before that row began, or never will.
std::optional<nlohmann::json> WaitForARow(const fs::path& path, const fs::path& log,
                                          std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    const bool second_row = ReadFile(log).find("the reference repeats") != std::string::npos;
    if (auto doc = DocumentWithARow(path); doc.has_value() || second_row) return doc;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return std::nullopt;
}

// Ranks started by hand over shm (the initiator to be killed, not a launcher that
// would clean up after it): pull, then push, whose reference never ends.
std::vector<std::string> TwoRowRun(const std::string& peer, int rank, const fs::path& out) {
  std::istringstream flags(
      "run --transport shm --isl 8192 --batches 1 --ops pull,push --warmup 0 --samples 3 "
      "--trials 1 --pool-budget 1GiB --control-timeout 60s --inject-fault slow-reference");
  std::vector<std::string> args{std::istream_iterator<std::string>(flags), {}};
  args.insert(args.end(), {"--peer", peer, "--rank", std::to_string(rank), "--out", out.string()});
  return args;
}

// The initiator killed outright once its first row is on disk: the document there
// parses, is partial (a checkpoint: "complete": false, "running": true, no stop
// named), holds the finished row with its verification, lists the other as missing,
// and is alone in --out (no temporary file); `summarize` renders it as PARTIAL.
TEST(KvbenchCheckpoint, AnInitiatorKilledOutrightLeavesTheRowsItFinished) {
  Dirs FreshDir;
  const fs::path out = FreshDir("checkpoint"), target_out = FreshDir("checkpoint_target"),
                 log = FreshDir("checkpoint_stderr"), target_log = FreshDir("checkpoint_t_stderr"),
                 summary = FreshDir("checkpoint_summary");
  const std::string peer = kvbench::testing::FreeLoopbackPeer();
  const pid_t target = StartKvbench(TwoRowRun(peer, 0, target_out), "/dev/null", target_log);
  const pid_t initiator = StartKvbench(TwoRowRun(peer, 1, out), "/dev/null", log);
  ASSERT_GT(target, 0);
  ASSERT_GT(initiator, 0);
  const std::optional<nlohmann::json> seen =
      WaitForARow(out / "kv-dsv4-b256-shm-isl8k-b1.json", log, std::chrono::seconds(120));
  kill(initiator, SIGKILL);
  int status = 0;
  EXPECT_TRUE(EndsOrKill(initiator, std::chrono::seconds(10), &status));
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  // The target finds its peer gone and ends (an error: the run did not end).
  EXPECT_TRUE(EndsOrKill(target, std::chrono::seconds(60), &status)) << ReadFile(target_log);
  ASSERT_TRUE(seen.has_value()) << "no document with a row came while the run went on:\n"
                                << ReadFile(log);

  const nlohmann::json doc = OnlyDocument(out);
  EXPECT_EQ(doc["version"], 4);
  EXPECT_EQ(doc["complete"], false);
  EXPECT_EQ(doc["running"], true);
  EXPECT_FALSE(doc.contains("stopped_by"));
  ASSERT_EQ(doc["rows"].size(), 1u);
  const nlohmann::json& row = doc["rows"][0];
  EXPECT_EQ(row["op"], "pull");
  EXPECT_EQ(row["verified"], "pass") << row["verify_detail"];
  EXPECT_NE(row["verify_detail"].get<std::string>().find("0 mismatching"), std::string::npos)
      << row["verify_detail"];
  EXPECT_EQ(row["burst_ms"]["n"], 3);  // measured whole
  ASSERT_EQ(doc["rows_missing"].size(), 1u);
  EXPECT_EQ(doc["rows_missing"][0]["op"], "push");
  EXPECT_EQ(doc["outcome"]["valid"], true) << doc["outcome"].dump();
  EXPECT_TRUE(doc.contains("command"));
  EXPECT_TRUE(doc.contains("environment"));

  EXPECT_EQ(kvbench::testing::RunBinary(KVBENCH_BINARY, "summarize " + out.string() + " --out " +
                                                            summary.string() + " > /dev/null 2>&1"),
            0);
  const std::string md = ReadFile(summary / "summary.md");
  EXPECT_NE(md.find("**PARTIAL** (1 of 1 document(s)"), std::string::npos) << md;
  EXPECT_NE(md.find("## kv-dsv4-b256-shm-isl8k-b1 (PARTIAL)\n"), std::string::npos) << md;
  EXPECT_NE(md.find("- **PARTIAL**: a checkpoint of a run that had not ended (killed outright, "
                    "crashed, or still running), written after 1 of 2 rows; not measured "
                    "(neither failed nor verified): push isl 8192 batch 1\n"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| pull | 8192 | 1 |"), std::string::npos) << md;
}

}  // namespace
