// End to end: a stop ends a run promptly, whatever its row in flight is doing. Each
// run's second row is made endless by a testing fault (--inject-fault
// slow-reference, slow-target-prepare), its first row finishes normally; the test
// stops the run once the fault says the second row is stuck, and expects the run to
// end within a few seconds, the first row kept and the second listed as missing.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "common/process_watch.h"
#include "common/sanitizer_reports.h"  // a rank's report fails the test
#include "kvbench_process.h"
#include "stopped_run.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using kvbench::testing::Dirs;
using kvbench::testing::EndsOrKill;
using kvbench::testing::ExpectGone;
using kvbench::testing::OnlyDocument;
using kvbench::testing::ReadFile;
using kvbench::testing::StartKvbench;
using kvbench::testing::WaitFor;

// How long a stopped run may take to end: about a second, and room for a busy host.
constexpr auto kPrompt = std::chrono::seconds(5);

// Two rows (pull, then push), the second stuck in `fault` until stopped.
std::vector<std::string> TwoRowRun(const std::string& transport, const std::string& fault) {
  std::istringstream flags(
      "run --isl 8192 --batches 1 --ops pull,push --warmup 0 --samples 3 --trials 1 "
      "--pool-budget 1GiB --control-timeout 60s");
  std::vector<std::string> args{std::istream_iterator<std::string>(flags), {}};
  args.insert(args.end(), {"--transport", transport, "--inject-fault", fault});
  return args;
}

// Two ranks started by hand over `transport`, running TwoRowRun(fault): the
// target as rank 0, the initiator as rank 1, each with its --out and stderr file
// in folders named after `name`.
struct ByHand {
  fs::path out, target_out, log, target_log;
  pid_t target = -1, initiator = -1;
};
ByHand StartByHand(Dirs& fresh, const std::string& name, const std::string& fault,
                   const std::string& transport = "shm") {
  ByHand r{fresh(name), fresh(name + "_target"), fresh(name + "_stderr"),
           fresh(name + "_t_stderr")};
  std::vector<std::string> t = TwoRowRun(transport, fault), i = t;
  const std::string peer = kvbench::testing::FreeLoopbackPeer();
  t.insert(t.end(), {"--rank", "0", "--peer", peer, "--out", r.target_out.string()});
  i.insert(i.end(), {"--rank", "1", "--peer", peer, "--out", r.out.string()});
  r.target = StartKvbench(t, "/dev/null", r.target_log);
  r.initiator = StartKvbench(i, "/dev/null", r.log);
  return r;
}

// The first row kept whole, the second missing, the stop named.
void ExpectFirstRowOnly(const fs::path& out, const std::string& rank) {
  ASSERT_TRUE(fs::exists(out)) << "no document written";
  const nlohmann::json doc = OnlyDocument(out);
  EXPECT_EQ(doc["complete"], false);
  EXPECT_EQ(doc["stopped_by"], "SIGINT");
  EXPECT_EQ(doc["stopped_rank"], rank);
  ASSERT_EQ(doc["rows"].size(), 1u);
  EXPECT_EQ(doc["rows"][0]["op"], "pull");
  EXPECT_EQ(doc["rows"][0]["verified"], "pass");
  ASSERT_EQ(doc["rows_missing"].size(), 1u);
  EXPECT_EQ(doc["rows_missing"][0]["op"], "push");
}

// Seconds from `t0` to now.
double SecondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Ranks started by hand over `transport`, the initiator stuck in an endless
// reference; the target alone is stopped: the initiator exits 1 within kPrompt, the
// first row kept (stopped on the target), and the target dies by SIGINT.
void ExpectAStoppedTargetInterruptsTheRow(const std::string& transport) {
  Dirs FreshDir;
  const auto [out, target_out, log, target_log, target, initiator] =
      StartByHand(FreshDir, "tgt_stop", "slow-reference", transport);
  ASSERT_GT(target, 0);
  ASSERT_GT(initiator, 0);
  const bool stuck = WaitFor(log, "the reference repeats", std::chrono::seconds(60));
  const Clock::time_point t0 = Clock::now();
  kill(target, SIGINT);
  int status = 0;
  EXPECT_TRUE(EndsOrKill(initiator, kPrompt, &status)) << ReadFile(log);
  EXPECT_LT(SecondsSince(t0), kPrompt.count());
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1) << status << ReadFile(log);
  EXPECT_TRUE(EndsOrKill(target, kPrompt, &status)) << ReadFile(target_log);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGINT) << status;
  ASSERT_TRUE(stuck) << ReadFile(log);
  ExpectFirstRowOnly(out, "target");
}

// A launcher stopped (SIGINT) while the initiator runs a reference that would not
// end: the initiator leaves it at the next rep, the target (its socket reference
// over tcp, or its loop over shm) is told, both ranks end and the launcher dies by
// the signal within seconds, the finished row written.
TEST(KvbenchPromptStop, AStopEndsALongReferenceAtOnce) {
  for (const std::string transport : {"shm", "tcp"}) {
    SCOPED_TRACE(transport);
    Dirs FreshDir;
    const fs::path out = FreshDir("ref_stop"), log = FreshDir("ref_stop_stderr");
    std::vector<std::string> args = TwoRowRun(transport, "slow-reference");
    args.insert(args.end(), {"--out", out.string()});
    const pid_t launcher = StartKvbench(args, "/dev/null", log);
    ASSERT_GT(launcher, 0);
    const bool stuck = WaitFor(log, "the reference repeats", std::chrono::seconds(60));
    const std::vector<pid_t> ranks = kvlane_tools::ChildrenOf(launcher);
    const Clock::time_point t0 = Clock::now();
    kill(launcher, SIGINT);
    int status = 0;
    EXPECT_TRUE(EndsOrKill(launcher, kPrompt, &status)) << ReadFile(log);
    EXPECT_LT(SecondsSince(t0), kPrompt.count());
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGINT) << status;
    ExpectGone(ranks, "a launcher stopped during a reference");
    ASSERT_TRUE(stuck) << ReadFile(log);
    ExpectFirstRowOnly(out, "initiator");
  }
}

// Ranks started by hand; the initiator alone is stopped while the target prepares
// its side of the second row (a wipe that would not end). The initiator tells it
// to abandon the row; the target notices between wipe steps, leaves the row and
// ends the run with the initiator. It exits 1, naming the stop: the run it served
// is partial (a script that waits on the target alone must not read it as valid).
TEST(KvbenchPromptStop, AStopReachesATargetBusyPreparing) {
  Dirs FreshDir;
  const auto [out, target_out, log, target_log, target, initiator] =
      StartByHand(FreshDir, "prep_stop", "slow-target-prepare");
  ASSERT_GT(target, 0);
  ASSERT_GT(initiator, 0);
  const bool stuck = WaitFor(target_log, "prepares until stopped", std::chrono::seconds(60));
  const Clock::time_point t0 = Clock::now();
  kill(initiator, SIGINT);
  int status = 0;
  EXPECT_TRUE(EndsOrKill(initiator, kPrompt, &status)) << ReadFile(log);
  EXPECT_LT(SecondsSince(t0), kPrompt.count());
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGINT) << status;
  EXPECT_TRUE(EndsOrKill(target, kPrompt, &status)) << ReadFile(target_log);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1) << status << ReadFile(target_log);
  EXPECT_NE(ReadFile(target_log).find("stopped before its last row (SIGINT on the initiator)"),
            std::string::npos)
      << ReadFile(target_log);
  ASSERT_TRUE(stuck) << ReadFile(target_log);
  ExpectFirstRowOnly(out, "initiator");
}

// Ranks started by hand; the target alone is stopped while the initiator runs a
// reference that would not end. Over shm the target waits meanwhile and tells the
// initiator at once, unasked; over tcp it serves the socket reference and tells it
// at the end of the repetition in flight, in place of its acknowledgement. The
// initiator leaves the row at its next rep, writes the finished row (stopped on the
// target) and exits 1; the target dies by SIGINT.
TEST(KvbenchPromptStop, AStoppedTargetInterruptsTheInitiatorsRow) {
  for (const std::string transport : {"shm", "tcp"}) {
    SCOPED_TRACE(transport);
    ExpectAStoppedTargetInterruptsTheRow(transport);
  }
}

}  // namespace
