// End to end: stopping `kvbench run` by a signal (the launcher, its ranks, a shell
// loop around it), watched from /proc (common/process_watch.h): no process is left,
// and the rows that finished before the stop are kept in a document marked
// incomplete.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/process_watch.h"
#include "common/sanitizer_reports.h"  // a rank's report fails the test
#include "kvbench_process.h"
#include "stopped_run.h"

namespace {

namespace fs = std::filesystem;
using kvbench::testing::Dirs;
using kvbench::testing::EndsOrKill;
using kvbench::testing::ExpectGone;
using kvbench::testing::OnlyDocument;
using kvbench::testing::RankOf;
using kvbench::testing::ReadFile;
using kvbench::testing::StartKvbench;
using kvbench::testing::WaitFor;
using kvlane_tools::ChildrenOf;
using kvlane_tools::CtrlCEndsWithin;
using kvlane_tools::Gone;

// Starts a launcher whose warm-up alone would last minutes (SIGHUP ignored when
// `ignore_hup`, as under nohup) and returns its pid and its two ranks' once both
// run.
pid_t StartLongRun(const std::string& out, bool ignore_hup, std::vector<pid_t>* ranks) {
  pid_t launcher = fork();
  if (launcher == 0) {
    int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 1);
    dup2(devnull, 2);
    signal(SIGINT, SIG_DFL);  // not ignored even where the test runs as a background job
    if (ignore_hup) signal(SIGHUP, SIG_IGN);
    execl(KVBENCH_BINARY, "kvbench", "run", "--transport", "shm", "--isl", "8192", "--batches", "1",
          "--warmup", "100000", "--samples", "1", "--trials", "1", "--pool-budget", "1GiB", "--out",
          out.c_str(), nullptr);
    _exit(127);
  }
  for (int i = 0; launcher > 0 && i < 1000 && ranks->size() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    *ranks = ChildrenOf(launcher);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the ranks are running
  return launcher;
}

// Whether process `pid` ignores `sig` (/proc/PID/status SigIgn).
bool Ignores(pid_t pid, int sig) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(f, line);) {
    if (line.rfind("SigIgn:", 0) == 0)
      return (std::stoull(line.substr(7), nullptr, 16) >> (sig - 1)) & 1;
  }
  return false;
}

// A launcher stopped by SIGTERM or SIGINT passes it on to both ranks, then dies by
// it itself (not an exit with 128 + N); one killed outright still stops them (their
// parent-death signal): no rank keeps measuring on its own.
TEST(KvbenchEndToEnd, StoppingTheLauncherStopsBothRanks) {
  for (int sig : {SIGTERM, SIGINT, SIGKILL}) {
    Dirs FreshDir;
    std::vector<pid_t> ranks;
    const pid_t launcher = StartLongRun(FreshDir("stop").string(), false, &ranks);
    ASSERT_GT(launcher, 0);
    EXPECT_EQ(ranks.size(), 2u);
    kill(launcher, sig);
    int status = 0;
    ASSERT_EQ(waitpid(launcher, &status, 0), launcher);
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == sig)
        << "signal " << sig << ": " << status;
    for (pid_t rank : ranks) {
      bool gone = Gone(rank);
      for (int i = 0; i < 500 && !gone; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        gone = Gone(rank);
      }
      EXPECT_TRUE(gone) << "rank process " << rank << " outlived its launcher (signal " << sig
                        << ")";
      if (!gone) kill(rank, SIGKILL);
    }
  }
}

// Under nohup (SIGHUP ignored when it starts) a hangup stops nothing: the launcher
// does not forward it, and its ranks ignore it too.
TEST(KvbenchEndToEnd, AnIgnoredHangupStaysIgnored) {
  Dirs FreshDir;
  std::vector<pid_t> ranks;
  const pid_t launcher = StartLongRun(FreshDir("nohup").string(), true, &ranks);
  ASSERT_GT(launcher, 0);
  ASSERT_EQ(ranks.size(), 2u);
  for (pid_t rank : ranks) EXPECT_TRUE(Ignores(rank, SIGHUP)) << "rank " << rank;
  kill(launcher, SIGHUP);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  int status = 0;
  EXPECT_EQ(waitpid(launcher, &status, WNOHANG), 0) << "a hangup under nohup stopped the run";
  for (pid_t rank : ranks) EXPECT_FALSE(Gone(rank)) << "rank " << rank;
  kill(launcher, SIGTERM);  // ends the test's run
  ASSERT_EQ(waitpid(launcher, &status, 0), launcher);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) << status;
}

// Ctrl-C stops a shell loop around kvbench run: the terminal's SIGINT reaches the
// shell, the launcher and its ranks (one process group), and a shell goes on with
// its loop unless the command died by SIGINT (an exit with 130 does not stop it).
TEST(KvbenchEndToEnd, CtrlCStopsAShellLoopAroundTheRun) {
  Dirs FreshDir;
  const std::string loop = std::string("for i in 1 2; do ") + KVBENCH_BINARY +
                           " run --transport shm --isl 8192 --batches 1 --warmup 100000 "
                           "--samples 1 --trials 1 --pool-budget 1GiB --out " +
                           FreshDir("loop").string() + "; done";
  const pid_t shell = fork();
  if (shell == 0) {
    setpgid(0, 0);  // a job of its own, as a terminal's foreground job
    signal(SIGINT, SIG_DFL);
    int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 1);
    dup2(devnull, 2);
    execl("/bin/bash", "bash", "-c", loop.c_str(), nullptr);
    _exit(127);
  }
  ASSERT_GT(shell, 0);
  std::vector<pid_t> launchers, ranks;
  for (int i = 0; i < 1000 && ranks.size() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    launchers = ChildrenOf(shell);
    if (!launchers.empty()) ranks = ChildrenOf(launchers[0]);
  }
  EXPECT_EQ(ranks.size(), 2u);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the ranks are running
  int status = 0;  // not ended: the loop went on to its second run
  const bool ended = CtrlCEndsWithin(shell, std::chrono::seconds(15), &status);
  EXPECT_TRUE(ended) << "the loop kept going after Ctrl-C";
  EXPECT_TRUE(ended && WIFSIGNALED(status) && WTERMSIG(status) == SIGINT) << status;
}

// Two ops at two batches: four rows, each long enough (samples) that a stop sent
// when the first row's progress line appears comes while a later one runs.
constexpr int kSamples = 100;
std::vector<std::string> FourRowRun() {
  std::istringstream flags(
      "run --transport shm --isl 8192 --batches 1,2 --ops pull,push --warmup 0 --samples " +
      std::to_string(kSamples) + " --trials 1 --pool-budget 1GiB --control-timeout 60s");
  return {std::istream_iterator<std::string>(flags), {}};
}

// The document of a run stopped by `signal_name` on `rank` after its first row:
// incomplete, naming the stop, holding at least the first row and not all four,
// each row it holds measured whole and verified, the rest listed as missing.
void ExpectPartial(const nlohmann::json& doc, const std::string& signal_name,
                   const std::string& rank) {
  EXPECT_EQ(doc["version"], 4);
  EXPECT_EQ(doc["complete"], false);
  EXPECT_EQ(doc["stopped_by"], signal_name);
  EXPECT_EQ(doc["stopped_rank"], rank);
  EXPECT_FALSE(doc.contains("running"));  // the final write replaced the checkpoint
  const size_t rows = doc["rows"].size();
  EXPECT_GE(rows, 1u);
  EXPECT_LT(rows, 4u);
  EXPECT_EQ(doc["rows_missing"].size(), 4u - rows) << doc["rows_missing"].dump();
  for (const auto& row : doc["rows"]) {
    EXPECT_EQ(row["verified"], "pass") << row["verify_detail"];
    EXPECT_EQ(row["burst_ms"]["n"], kSamples);  // no row kept half-measured
    EXPECT_EQ(row["request_ms"].size(), size_t{kSamples});
  }
  EXPECT_EQ(doc["outcome"]["valid"], true) << doc["outcome"].dump();
}

// A run stopped by SIGINT or SIGTERM after its first row finished: the launcher
// passes the stop on, the initiator abandons the row in flight and writes the
// rows that finished, marked incomplete; both ranks end, the launcher dies by the
// signal, its table says PARTIAL, and so does `summarize` of the document, which
// names the rows it lacks.
TEST(KvbenchEndToEnd, AStoppedRunKeepsTheRowsThatFinished) {
  for (const auto& [sig, name] : {std::pair{SIGINT, "SIGINT"}, std::pair{SIGTERM, "SIGTERM"}}) {
    Dirs FreshDir;
    const fs::path out = FreshDir("partial"), table = FreshDir("partial_stdout"),
                   log = FreshDir("partial_stderr"), summary = FreshDir("partial_summary");
    std::vector<std::string> args = FourRowRun();
    args.insert(args.end(), {"--out", out.string()});
    const pid_t launcher = StartKvbench(args, table, log);
    ASSERT_GT(launcher, 0);
    const bool first_row = WaitFor(log, "[kvbench] pull isl", std::chrono::seconds(120));
    const std::vector<pid_t> ranks = ChildrenOf(launcher);
    EXPECT_TRUE(first_row) << ReadFile(log);
    EXPECT_EQ(ranks.size(), 2u);
    kill(launcher, sig);
    int status = 0;
    EXPECT_TRUE(EndsOrKill(launcher, std::chrono::seconds(60), &status)) << name;
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == sig) << name << ": " << status;
    ExpectGone(ranks, std::string("a launcher stopped by ") + name);
    if (!first_row) continue;
    ASSERT_TRUE(fs::exists(out)) << "no document written: " << ReadFile(log);
    const nlohmann::json doc = OnlyDocument(out);
    ExpectPartial(doc, name, "initiator");
    EXPECT_NE(ReadFile(table).find(std::string("PARTIAL RESULT, not a full run: stopped by ") +
                                   name + " on the initiator after "),
              std::string::npos)
        << ReadFile(table);
    EXPECT_EQ(
        kvbench::testing::RunBinary(KVBENCH_BINARY, "summarize " + out.string() + " --out " +
                                                        summary.string() + " > /dev/null 2>&1"),
        0);
    const std::string md = ReadFile(summary / "summary.md");
    EXPECT_NE(md.find("**PARTIAL** (1 of 1 document(s)"), std::string::npos) << md;
    EXPECT_NE(md.find(" (PARTIAL)\n"), std::string::npos) << md;
    for (const auto& m : doc["rows_missing"]) {
      const std::string row =
          m["op"].get<std::string>() + " isl " + m["isl"].dump() + " batch " + m["batch"].dump();
      EXPECT_NE(md.find(row), std::string::npos) << row << " not named in\n" << md;
    }
  }
}

// A second stop does not wait for the clean-up: here the target no longer answers
// (SIGSTOP), so the initiator, stopped, waits for it to leave the row; a second
// SIGINT to the launcher kills both ranks at once, and the launcher dies by SIGINT.
// No row finished, so no document is written; and the temporary file a killed rank
// may leave while writing one (planted here, named as the initiator's would be) is
// removed, while files of other names or processes stay.
TEST(KvbenchEndToEnd, ASecondStopEndsTheRunAtOnce) {
  Dirs FreshDir;
  const fs::path out = FreshDir("second_stop"), log = FreshDir("second_stop_stderr");
  const pid_t launcher = StartKvbench(
      {"run", "--transport", "shm", "--isl", "8192", "--batches", "1", "--warmup", "100000",
       "--samples", "1", "--trials", "1", "--pool-budget", "1GiB", "--out", out.string()},
      "/dev/null", log);
  ASSERT_GT(launcher, 0);
  // The initiator's header comes once its session is open; the target's opens with it.
  const bool open = WaitFor(log, "[kvbench] kv-dsv4", std::chrono::seconds(120));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const std::vector<pid_t> ranks = ChildrenOf(launcher);
  int status = 0;
  if (!open || ranks.size() != 2) EndsOrKill(launcher, std::chrono::seconds(0), &status);
  ASSERT_TRUE(open) << ReadFile(log);
  ASSERT_EQ(ranks.size(), 2u);
  const pid_t target = RankOf(ranks[0]) == 0 ? ranks[0] : ranks[1];
  EXPECT_EQ(RankOf(target), 0);
  const pid_t initiator = target == ranks[0] ? ranks[1] : ranks[0];
  fs::create_directories(out);
  const std::string doc = ".kv-dsv4-b256-shm-isl8k-b1.json.tmp-";
  const fs::path left = out / (doc + std::to_string(initiator) + "-0"),
                 other = out / (doc + std::to_string(launcher) + "-0"), notes = out / "notes.txt";
  for (const fs::path& p : {left, other, notes}) std::ofstream(p) << "{";
  kill(target, SIGSTOP);
  kill(launcher, SIGINT);
  std::this_thread::sleep_for(std::chrono::seconds(1));
  EXPECT_EQ(waitpid(launcher, &status, WNOHANG), 0) << "the first stop did not wait for the ranks";
  kill(launcher, SIGINT);
  EXPECT_TRUE(EndsOrKill(launcher, std::chrono::seconds(15), &status))
      << "a second stop did not end the run at once";
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGINT) << status;
  ExpectGone(ranks, "a launcher stopped twice");
  EXPECT_FALSE(fs::exists(left)) << "a killed rank's temporary file was left in --out";
  EXPECT_TRUE(fs::exists(other));
  EXPECT_TRUE(fs::exists(notes));
  EXPECT_EQ(std::distance(fs::directory_iterator(out), fs::directory_iterator()), 2);
}

// Ranks started by hand, and only the target stopped (SIGINT): it tells the
// initiator, which abandons the row in flight, writes the rows that finished
// (stopped on the target) and exits 1, not being stopped itself; the target then
// dies by the signal.
TEST(KvbenchEndToEnd, AStoppedTargetEndsTheRun) {
  Dirs FreshDir;
  const fs::path out = FreshDir("target_stop"), target_out = FreshDir("target_stop_target"),
                 log = FreshDir("target_stop_stderr"), table = FreshDir("target_stop_stdout"),
                 target_log = FreshDir("target_stop_target_stderr");
  std::vector<std::string> common = FourRowRun();
  common.insert(common.end(), {"--peer", kvbench::testing::FreeLoopbackPeer()});
  std::vector<std::string> t = common, i = common;
  t.insert(t.end(), {"--rank", "0", "--out", target_out.string()});
  i.insert(i.end(), {"--rank", "1", "--out", out.string()});
  const pid_t target = StartKvbench(t, "/dev/null", target_log);
  const pid_t initiator = StartKvbench(i, table, log);
  ASSERT_GT(target, 0);
  ASSERT_GT(initiator, 0);
  const bool first_row = WaitFor(log, "[kvbench] pull isl", std::chrono::seconds(120));
  EXPECT_TRUE(first_row) << ReadFile(log);
  kill(target, SIGINT);
  int status = 0;
  EXPECT_TRUE(EndsOrKill(initiator, std::chrono::seconds(60), &status)) << ReadFile(log);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1) << status << "\n" << ReadFile(log);
  EXPECT_TRUE(EndsOrKill(target, std::chrono::seconds(60), &status)) << ReadFile(target_log);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGINT) << status;
  if (!first_row) return;
  ASSERT_TRUE(fs::exists(out)) << "no document written: " << ReadFile(log);
  ExpectPartial(OnlyDocument(out), "SIGINT", "target");
  EXPECT_FALSE(fs::exists(target_out));
}

}  // namespace
