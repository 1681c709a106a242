// WaitOrKill on real child processes: a stop asks first (SIGTERM) and kills only
// after kStopGrace; a deadline kills at once.
#include "spawn.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>

namespace lanebench {
namespace {

using Clock = std::chrono::steady_clock;

// A child that waits for signals forever, SIGTERM ignored when `ignore_term`;
// returned once its disposition is set.
pid_t Sleeper(bool ignore_term) {
  int ready[2];
  if (pipe(ready) != 0) return -1;
  const pid_t pid = fork();
  if (pid == 0) {
    signal(SIGTERM, ignore_term ? SIG_IGN : SIG_DFL);
    (void)!write(ready[1], "r", 1);
    for (;;) pause();
  }
  char byte;
  close(ready[1]);
  if (pid > 0) (void)!read(ready[0], &byte, 1);
  close(ready[0]);
  return pid;
}

double SecondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// What a WaitOrKill that sat out the stop's grace (before asking, or before
// killing) takes at least: the bound of "at once", as loose as it can be and still
// tell one from the other (a loaded machine may be slow to run the child's end).
const double kGraceS = std::chrono::duration<double>(kStopGrace).count();

const auto kStop = [] { return true; };

// Whether child `pid` is dead and reaped, as WaitOrKill leaves one it killed: -1 alone
// could be returned for a child left running (or a zombie). One still there is killed
// and reaped here, so that a failing test leaves nothing behind.
bool KilledAndReaped(pid_t pid) {
  if (waitpid(pid, nullptr, WNOHANG) < 0 && errno == ECHILD) return true;
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  return false;
}

TEST(WaitOrKill, AStopAsksTheProcessFirst) {
  const pid_t pid = Sleeper(false);
  ASSERT_GT(pid, 0);
  const auto t0 = Clock::now();
  EXPECT_EQ(WaitOrKill(pid, Clock::now() + std::chrono::minutes(1), nullptr, kStop),
            128 + SIGTERM);  // ended when asked, not killed
  EXPECT_LT(SecondsSince(t0), kGraceS) << "waited out the grace before it asked";
}

TEST(WaitOrKill, AProcessThatStaysIsKilledAfterTheGrace) {
  const pid_t pid = Sleeper(true);
  ASSERT_GT(pid, 0);
  const auto t0 = Clock::now();
  EXPECT_EQ(WaitOrKill(pid, Clock::now() + std::chrono::minutes(1), nullptr, kStop), -1);
  EXPECT_GE(SecondsSince(t0), kGraceS);
  EXPECT_LT(SecondsSince(t0), 10);
  EXPECT_TRUE(KilledAndReaped(pid));
}

TEST(WaitOrKill, ADeadlineOrGivingUpKillsAtOnce) {
  for (bool deadline : {true, false}) {
    const pid_t pid = Sleeper(false);
    ASSERT_GT(pid, 0);
    const auto t0 = Clock::now();
    EXPECT_EQ(deadline ? WaitOrKill(pid, Clock::now())
                       : WaitOrKill(pid, Clock::now() + std::chrono::minutes(1), kStop),
              -1);
    EXPECT_LT(SecondsSince(t0), kGraceS) << (deadline ? "deadline" : "give_up");
    EXPECT_TRUE(KilledAndReaped(pid)) << (deadline ? "deadline" : "give_up");
  }
}

TEST(WaitOrKill, AnExitCodeIsReturned) {
  const pid_t pid = fork();
  if (pid == 0) _exit(3);
  ASSERT_GT(pid, 0);
  EXPECT_EQ(WaitOrKill(pid, Clock::now() + std::chrono::minutes(1)), 3);
}

}  // namespace
}  // namespace lanebench
