#include "spawn.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

namespace lanebench {

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

int WaitOrKill(pid_t pid, std::chrono::steady_clock::time_point deadline,
               const std::function<bool()>& give_up) {
  int status = 0;
  for (;;) {
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (r < 0 && errno != EINTR) return -1;
    if (std::chrono::steady_clock::now() >= deadline || (give_up && give_up())) {
      kill(pid, SIGKILL);
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : -1;
}

}  // namespace lanebench
