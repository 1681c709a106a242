// Stopping a real lanebench orchestrator: a stop signal (SIGTERM, SIGINT, SIGHUP)
// stops its workers, removes its run directory, writes the runs that finished
// (marked stopped), and the orchestrator then dies by that signal (not an exit
// with 128 + N); one killed outright (SIGKILL) leaves no worker running either.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "common/process_watch.h"
#include "common/sanitizer_reports.h"  // a worker's report fails the test

namespace lanebench {
namespace {

using kvlane_tools::ChildrenOf;
using kvlane_tools::CtrlCEndsWithin;
using kvlane_tools::EndsWithin;
using kvlane_tools::Gone;

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

bool GoneWithin(pid_t pid, std::chrono::seconds limit) {
  for (auto deadline = Clock::now() + limit; Clock::now() < deadline;) {
    if (Gone(pid)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return Gone(pid);
}

// A private TMPDIR, so that the run directories seen there are this test's alone
// (the orchestrator inherits it); removed with all it holds.
class PrivateTmp {
 public:
  PrivateTmp() {
    std::string tmpl = (fs::temp_directory_path() / "lanebench_stop_XXXXXX").string();
    path_ = mkdtemp(tmpl.data()) ? tmpl : "";
    old_ = getenv("TMPDIR") ? getenv("TMPDIR") : "";
    setenv("TMPDIR", path_.c_str(), 1);
  }
  ~PrivateTmp() {
    if (old_.empty())
      unsetenv("TMPDIR");
    else
      setenv("TMPDIR", old_.c_str(), 1);
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  std::vector<fs::path> RunDirs() const {
    std::vector<fs::path> dirs;
    for (const auto& e : fs::directory_iterator(path_))
      if (e.path().filename().string().rfind("lanebench-", 0) == 0) dirs.push_back(e.path());
    return dirs;
  }

 private:
  fs::path path_;
  std::string old_;
};

// Forks and execs `argv` with SIGINT at its default action (a background job of a
// script starts with it ignored) and stdout, stderr to files `out`, `err`; in a
// process group of its own when `own_group`.
pid_t Start(const std::vector<std::string>& args, bool own_group = false,
            const std::string& out = "/dev/null", const std::string& err = "/dev/null") {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    if (own_group) setpgid(0, 0);
    signal(SIGINT, SIG_DFL);
    dup2(open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644), 1);
    dup2(open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644), 2);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

// A run whose first measured run alone would last minutes.
std::vector<std::string> LongRun(const fs::path& json) {
  return {LANEBENCH_BINARY, "--transport",      "tcp",   "--shape", "single",     "--single-bytes",
          "2MiB",           "--single-ops",     "write", "--pairs", "1",          "--iters",
          "100000",         "--stall-probe-ms", "0",     "--json",  json.string()};
}

// Whether a run directory in `tmp` holds source.meta. The source writes it once it
// has loaded every target's metadata (source_rig.cc, MeetTargets): from then on the
// run's target and source are both up and connected, and its iterations follow.
bool SourceConnected(const PrivateTmp& tmp) {
  std::error_code ec;
  for (const fs::path& dir : tmp.RunDirs())
    if (fs::exists(dir / "source.meta", ec)) return true;
  return false;
}

// Waits up to 20 s for a run of `orchestrator` to be under way (SourceConnected);
// returns the orchestrator's children then: that run's workers. A run not under way
// by then fails the test; the caller still stops and reaps the orchestrator.
std::vector<pid_t> WaitForRunUnderWay(const PrivateTmp& tmp, pid_t orchestrator) {
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  while (!SourceConnected(tmp) && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_TRUE(SourceConnected(tmp))
      << "no run under way after 20 s: no source.meta in a run directory under " << tmp.path()
      << " (the source never connected to its targets)";
  return ChildrenOf(orchestrator);
}

void ExpectWorkersGone(const std::vector<pid_t>& workers, int sig) {
  for (pid_t w : workers) {
    const bool gone = GoneWithin(w, std::chrono::seconds(5));
    EXPECT_TRUE(gone) << "signal " << sig << ": worker " << w << " outlived its orchestrator";
    if (!gone) kill(w, SIGKILL);
  }
}

class LanebenchStop : public ::testing::TestWithParam<int> {};

TEST_P(LanebenchStop, StopsWorkersRemovesTheRunDirAndDiesByTheSignal) {
  const int sig = GetParam();
  PrivateTmp tmp;
  const pid_t orchestrator = Start(LongRun(tmp.path() / "out.json"));
  ASSERT_GT(orchestrator, 0);
  const std::vector<pid_t> workers = WaitForRunUnderWay(tmp, orchestrator);
  EXPECT_GE(workers.size(), 2u);
  kill(orchestrator, sig);
  int status = 0;
  const bool ended = EndsWithin(orchestrator, std::chrono::seconds(20), &status);
  if (!ended) {
    kill(orchestrator, SIGKILL);
    waitpid(orchestrator, &status, 0);
  }
  EXPECT_TRUE(ended) << "the orchestrator did not stop";
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == sig)
      << "stopped by signal " << sig << ": "
      << (WIFEXITED(status) ? "exited " + std::to_string(WEXITSTATUS(status))
                            : "died by signal " + std::to_string(WTERMSIG(status)));
  ExpectWorkersGone(workers, sig);
  if (sig != SIGKILL) {  // one killed outright cannot remove it
    EXPECT_TRUE(tmp.RunDirs().empty()) << "the run directory was left behind";
  }
}

INSTANTIATE_TEST_SUITE_P(Signals, LanebenchStop,
                         ::testing::Values(SIGTERM, SIGINT, SIGHUP, SIGKILL),
                         [](const auto& info) { return std::string(sigabbrev_np(info.param)); });

// Ctrl-C stops a shell loop around lanebench: the terminal's SIGINT reaches the
// shell, the orchestrator and its workers (one process group), and a shell goes
// on with its loop unless the command died by SIGINT (exiting 130 is not enough).
// No worker of the run outlives it.
TEST(LanebenchStopLoop, CtrlCStopsAShellLoopAroundTheRun) {
  PrivateTmp tmp;
  std::string loop = "for i in 1 2; do";
  for (const std::string& a : LongRun(tmp.path() / "out.json")) loop += " '" + a + "'";
  loop += "; done";
  const pid_t shell = Start({"/bin/bash", "-c", loop}, /*own_group=*/true);
  ASSERT_GT(shell, 0);
  std::vector<pid_t> orchestrator;
  for (int i = 0; i < 1000 && orchestrator.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    orchestrator = ChildrenOf(shell);
  }
  ASSERT_EQ(orchestrator.size(), 1u);
  const std::vector<pid_t> workers = WaitForRunUnderWay(tmp, orchestrator[0]);
  EXPECT_GE(workers.size(), 2u);
  int status = 0;  // not ended: the loop went on to its second run
  const bool ended = CtrlCEndsWithin(shell, std::chrono::seconds(20), &status);
  EXPECT_TRUE(ended) << "the loop kept going after Ctrl-C";
  EXPECT_TRUE(ended && WIFSIGNALED(status) && WTERMSIG(status) == SIGINT) << status;
  ExpectWorkersGone(workers, SIGINT);  // the run's workers went with the loop
}

// The progress lines ("[3/100] ...") in `text`: the runs that finished.
int ProgressLines(const std::string& text) {
  const std::regex line(R"(^\[[0-9]+/[0-9]+\] )", std::regex::multiline);
  return static_cast<int>(
      std::distance(std::sregex_iterator(text.begin(), text.end(), line), std::sregex_iterator()));
}

// Stopped part-way, the orchestrator still writes the runs that finished, marked
// so that nobody takes the document for a full result, and its table says so.
TEST(LanebenchStopDocument, AStoppedRunWritesTheRunsThatFinished) {
  PrivateTmp tmp;
  const fs::path json = tmp.path() / "out.json", out = tmp.path() / "out", err = tmp.path() / "err";
  const pid_t orchestrator = Start({LANEBENCH_BINARY,
                                    "--transport",
                                    "tcp",
                                    "--shape",
                                    "single",
                                    "--single-bytes",
                                    "4KiB",
                                    "--single-ops",
                                    "write",
                                    "--pairs",
                                    "50",
                                    "--warmup",
                                    "0",
                                    "--iters",
                                    "20",
                                    "--stall-probe-ms",
                                    "0",
                                    "--idle-us",
                                    "0",
                                    "--json",
                                    json.string()},
                                   false, out.string(), err.string());
  ASSERT_GT(orchestrator, 0);
  for (int i = 0; i < 6000 && ProgressLines(ReadFile(err)) < 2; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  kill(orchestrator, SIGINT);
  int status = 0;
  const bool ended = EndsWithin(orchestrator, std::chrono::seconds(20), &status);
  if (!ended) {
    kill(orchestrator, SIGKILL);
    waitpid(orchestrator, &status, 0);
  }
  ASSERT_TRUE(ended && WIFSIGNALED(status) && WTERMSIG(status) == SIGINT) << status;
  const int finished = ProgressLines(ReadFile(err));
  ASSERT_GE(finished, 2) << ReadFile(err);
  ASSERT_LT(finished, 100);

  std::ifstream in(json);
  const nlohmann::json doc = nlohmann::json::parse(in, nullptr, false);
  ASSERT_TRUE(doc.is_object()) << "no JSON document at " << json;
  EXPECT_EQ(doc["complete"], false);
  EXPECT_EQ(doc["stopped_by"], "SIGINT");
  EXPECT_EQ(doc["outcome"], "stopped");
  EXPECT_EQ(doc["verification"]["runs"], finished);
  EXPECT_EQ(doc["verification"]["runs_planned"], 100);
  EXPECT_EQ(doc["verification"]["valid_runs"], finished);
  size_t runs = 0;
  for (const auto& [arm, a] : doc["cases"][0]["arms"].items()) runs += a["runs"].size();
  EXPECT_EQ(runs, static_cast<size_t>(finished));
  const std::string table = ReadFile(out);
  EXPECT_NE(table.find("PARTIAL RESULT, not a full run: stopped by SIGINT after " +
                       std::to_string(finished) + " of 100 runs"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("outcome: stopped (incomplete: stopped by SIGINT)"), std::string::npos);
  EXPECT_NE(ReadFile(err).find("lanebench: stopped by SIGINT"), std::string::npos);
}

}  // namespace
}  // namespace lanebench
