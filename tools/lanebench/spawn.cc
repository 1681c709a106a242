#include "spawn.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

namespace lanebench {
namespace {

using Clock = std::chrono::steady_clock;

// A reaped process's exit code, or 128 + the signal it died by.
int CodeOf(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : -1;
}

// Kills `pid` (SIGKILL) and reaps it; -1.
int Kill(pid_t pid) {
  int status = 0;
  kill(pid, SIGKILL);
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return -1;
}

// Reaps `pid` if it has ended: true with *code set; false while it runs.
bool Reaped(pid_t pid, int* code) {
  int status = 0;
  const pid_t r = waitpid(pid, &status, WNOHANG);
  if (r == pid) {
    *code = CodeOf(status);
    return true;
  }
  if (r < 0 && errno != EINTR) {  // not a child of this process: nothing to wait for
    *code = -1;
    return true;
  }
  return false;
}

// Asks `pid` to stop (SIGTERM), waits kStopGrace for it, then kills it.
int Stop(pid_t pid) {
  kill(pid, SIGTERM);
  int code = -1;
  for (const auto deadline = Clock::now() + kStopGrace; Clock::now() < deadline;) {
    if (Reaped(pid, &code)) return code;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return Kill(pid);
}

}  // namespace

kvlane::Result<pid_t> SpawnSelf(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  static char kSelf[] = "lanebench";
  argv.push_back(kSelf);
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t orchestrator = getpid();
  pid_t pid = fork();
  if (pid < 0) return kvlane::Status::Backend(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    // An orchestrator killed (SIGKILL, or a signal it does not catch: stop_signal.h) takes
    // its workers with it instead of leaving them to run out their iterations alone.
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != orchestrator) _exit(127);
    execv("/proc/self/exe", argv.data());
    _exit(127);  // exec failed; only async-signal-safe calls after fork
  }
  return pid;
}

int WaitOrKill(pid_t pid, Clock::time_point deadline, const std::function<bool()>& give_up,
               const std::function<bool()>& stopping) {
  int code = -1;
  for (;;) {
    if (Reaped(pid, &code)) return code;
    if (stopping && stopping()) return Stop(pid);
    if (Clock::now() >= deadline || (give_up && give_up())) return Kill(pid);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

}  // namespace lanebench
