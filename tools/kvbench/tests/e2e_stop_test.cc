// End to end: stopping `kvbench run` by a signal (the launcher, its ranks, a shell
// loop around it), watched from /proc (common/process_watch.h).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "common/process_watch.h"
#include "kvbench_process.h"

namespace {

using kvbench::testing::Dirs;
using kvlane_tools::ChildrenOf;
using kvlane_tools::EndsWithin;
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
  kill(-shell, SIGINT);
  int status = 0;
  const bool ended = EndsWithin(shell, std::chrono::seconds(15), &status);
  if (!ended) {  // the loop went on to its second run
    kill(-shell, SIGKILL);
    waitpid(shell, &status, 0);
  }
  EXPECT_TRUE(ended) << "the loop kept going after Ctrl-C";
  EXPECT_TRUE(ended && WIFSIGNALED(status) && WTERMSIG(status) == SIGINT) << status;
}

}  // namespace
