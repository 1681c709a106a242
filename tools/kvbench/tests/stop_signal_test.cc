// The stop handling of kvbench's ranks (common/stop_signal.h, shared with lanebench):
// the first stop signal is recorded, and a later one is recorded (lanebench), ignored
// (a rank its launcher spawned) or fatal (any other rank: a second Ctrl-C), the files
// being written removed first. Each case runs in a child process of its own, which it
// may kill.
#include "common/stop_signal.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace {

using kvlane_tools::CatchStopSignals;
using kvlane_tools::LaterStop;
using kvlane_tools::RemoveOnLaterStop;
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

// A rank of its own dies by a second stop at once; the files it is writing, named
// to RemoveOnLaterStop, go first. One no longer named stays, and so does every file
// when the second stop does not kill (a spawned rank ignores it).
int WriteThreeThenStopTwice(LaterStop later, const std::string& dir) {
  CatchStopSignals(later);
  RemoveOnLaterStop a(dir + "/a"), b(dir + "/b");
  { RemoveOnLaterStop done(dir + "/done"); }
  for (const char* name : {"/a", "/b", "/done"}) {
    if (close(creat((dir + name).c_str(), 0644)) != 0) return 10;
  }
  if (!a.armed() || !b.armed()) return 11;
  raise(SIGINT);
  raise(SIGTERM);
  return 0;
}

bool Exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

TEST(StopSignal, ASecondStopRemovesTheFilesBeingWritten) {
  char dir[] = "/tmp/kvbench_stop_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string d = dir;
  int status = InChild([&] { return WriteThreeThenStopTwice(LaterStop::kDie, d); });
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) << status;
  EXPECT_FALSE(Exists(d + "/a"));
  EXPECT_FALSE(Exists(d + "/b"));
  EXPECT_TRUE(Exists(d + "/done"));
  status = InChild([&] { return WriteThreeThenStopTwice(LaterStop::kIgnore, d); });
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_TRUE(Exists(d + "/a") && Exists(d + "/b") && Exists(d + "/done"));
  for (const char* name : {"/a", "/b", "/done"}) unlink((d + name).c_str());
  rmdir(dir);
}

// The slots are few and fixed: a guard past them, or over a path too long for one,
// covers nothing; a slot a guard gave back serves the next.
TEST(StopSignal, RemoveOnLaterStopHasFixedSlots) {
  EXPECT_FALSE(RemoveOnLaterStop(std::string(RemoveOnLaterStop::kMaxRemovedPath, 'x')).armed());
  std::vector<std::unique_ptr<RemoveOnLaterStop>> held;
  for (int i = 0; i < RemoveOnLaterStop::kMaxRemovedOnStop; ++i) {
    held.push_back(std::make_unique<RemoveOnLaterStop>("/tmp/f" + std::to_string(i)));
    EXPECT_TRUE(held.back()->armed());
  }
  EXPECT_FALSE(RemoveOnLaterStop("/tmp/one-too-many").armed());
  held.pop_back();
  EXPECT_TRUE(RemoveOnLaterStop("/tmp/again").armed());
}

// kvbench's local transport runs both ranks as threads of one process, and each
// installs the handler. In this process, not a child: ThreadSanitizer's report of a
// race fails the test through this process's exit code, which a child's _exit skips.
TEST(StopSignal, TwoThreadsMayInstallItAtOnce) {
  constexpr int kSignals[] = {SIGTERM, SIGINT, SIGHUP};
  struct sigaction before[3] = {};
  for (int i = 0; i < 3; ++i) sigaction(kSignals[i], nullptr, &before[i]);
  std::thread other([] { CatchStopSignals(LaterStop::kIgnore); });
  CatchStopSignals(LaterStop::kIgnore);
  other.join();
  EXPECT_EQ(StopSignal(), 0);
  for (int i = 0; i < 3; ++i) {
    struct sigaction now = {};
    sigaction(kSignals[i], nullptr, &now);
    const bool ignored = before[i].sa_handler == SIG_IGN;  // stays so; else caught now
    EXPECT_TRUE(ignored ? now.sa_handler == SIG_IGN
                        : now.sa_handler != SIG_IGN && now.sa_handler != SIG_DFL)
        << kSignals[i];
    sigaction(kSignals[i], &before[i], nullptr);  // the test process's own actions again
  }
}

TEST(StopSignal, NamesTheSignal) {
  EXPECT_EQ(kvlane_tools::SignalName(SIGINT), "SIGINT");
  EXPECT_EQ(kvlane_tools::SignalName(SIGTERM), "SIGTERM");
}

}  // namespace
