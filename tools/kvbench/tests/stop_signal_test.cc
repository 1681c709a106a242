// The stop handling of kvbench's ranks (common/stop_signal.h, shared with lanebench):
// the first stop signal is recorded, and a later one is recorded (lanebench), ignored
// (a rank its launcher spawned) or fatal (any other rank: a second Ctrl-C). Each case
// runs in a child process of its own, which it may kill.
#include "common/stop_signal.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>

namespace {

using kvlane_tools::CatchStopSignals;
using kvlane_tools::LaterStop;
using kvlane_tools::StopSignal;

// Runs `body` in a child process, which exits with what `body` returns (unless a
// signal ends it first); its wait status.
int InChild(const std::function<int()>& body) {
  const pid_t pid = fork();
  if (pid == 0) _exit(body());
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

// Raises SIGINT, then SIGTERM, with `later` installed; 0 when StopSignal() read the
// wanted signal after each.
int RaiseBoth(LaterStop later, int want_after_first, int want_after_second) {
  CatchStopSignals(later);
  if (StopSignal() != 0) return 10;
  raise(SIGINT);  // delivered before raise returns: it is not blocked
  if (StopSignal() != want_after_first) return 11;
  raise(SIGTERM);
  return StopSignal() == want_after_second ? 0 : 12;
}

TEST(StopSignal, ASecondStopKillsARankOfItsOwn) {
  const int status = InChild([] { return RaiseBoth(LaterStop::kDie, SIGINT, SIGINT); });
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) << status;
}

TEST(StopSignal, ASpawnedRankIgnoresASecondStop) {
  const int status = InChild([] { return RaiseBoth(LaterStop::kIgnore, SIGINT, SIGINT); });
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

TEST(StopSignal, LanebenchRecordsTheLatestStop) {
  const int status = InChild([] { return RaiseBoth(LaterStop::kRecord, SIGINT, SIGTERM); });
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

// nohup: a hangup ignored when the tool started stays ignored, recorded by nobody.
TEST(StopSignal, ASignalIgnoredAtStartStaysIgnored) {
  const int status = InChild([] {
    signal(SIGHUP, SIG_IGN);
    CatchStopSignals(LaterStop::kDie);
    raise(SIGHUP);
    struct sigaction now = {};
    sigaction(SIGHUP, nullptr, &now);
    return StopSignal() == 0 && now.sa_handler == SIG_IGN ? 0 : 1;
  });
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

TEST(StopSignal, NamesTheSignal) {
  EXPECT_EQ(kvlane_tools::SignalName(SIGINT), "SIGINT");
  EXPECT_EQ(kvlane_tools::SignalName(SIGTERM), "SIGTERM");
}

}  // namespace
