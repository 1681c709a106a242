#include "launcher.h"

#include <fmt/format.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <thread>

#include "control_channel.h"
#include "rank.h"

namespace kvbench {
namespace {

RunConfig ForRank(const RunConfig& config, int rank, const std::string& peer) {
  RunConfig c = config;
  c.rank = rank;
  c.peer = peer;
  return c;
}

int RunThreads(const RunConfig& config, const std::string& peer) {
  int codes[2] = {kExitError, kExitError};
  std::thread target([&] { codes[0] = RunRank(ForRank(config, 0, peer)); });
  codes[1] = RunRank(ForRank(config, 1, peer));
  target.join();
  return std::max(codes[0], codes[1]);
}

// The spawned ranks, for ForwardStop; set while the stop signals are blocked.
pid_t g_ranks[2] = {-1, -1};
volatile sig_atomic_t g_stop_signal = 0;
constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGHUP};

// A launcher stopped by SIGINT, SIGTERM or SIGHUP passes the signal on to both
// ranks (async-signal-safe: kill only), so that none keeps running on its own.
extern "C" void ForwardStop(int sig) {
  g_stop_signal = sig;
  for (pid_t pid : g_ranks) {
    if (pid > 0) kill(pid, sig);
  }
}

// Blocks the stop signals and installs ForwardStop; restores both when it goes.
// Spawn happens while they are blocked, so a signal waits until the pids are known.
class StopForwarding {
 public:
  StopForwarding() {
    sigset_t stop;
    sigemptyset(&stop);
    for (int sig : kStopSignals) sigaddset(&stop, sig);
    sigprocmask(SIG_BLOCK, &stop, &mask_);
    struct sigaction forward = {};
    forward.sa_handler = ForwardStop;
    sigemptyset(&forward.sa_mask);
    for (size_t i = 0; i < std::size(kStopSignals); ++i) {
      sigaction(kStopSignals[i], &forward, &old_[i]);
    }
  }
  ~StopForwarding() {
    for (size_t i = 0; i < std::size(kStopSignals); ++i)
      sigaction(kStopSignals[i], &old_[i], nullptr);
    sigprocmask(SIG_SETMASK, &mask_, nullptr);
    g_ranks[0] = g_ranks[1] = -1;
  }
  // The mask before the stop signals were blocked (a spawned rank starts with it).
  const sigset_t& mask() const { return mask_; }
  // Delivers a stop signal that arrived while blocked: the ranks are known now.
  void Unblock() const {
    sigset_t stop;
    sigemptyset(&stop);
    for (int sig : kStopSignals) sigaddset(&stop, sig);
    sigprocmask(SIG_UNBLOCK, &stop, nullptr);
  }

 private:
  sigset_t mask_;
  struct sigaction old_[std::size(kStopSignals)];
};

pid_t Spawn(const RunConfig& config, int rank, const std::string& peer, const sigset_t& mask) {
  std::vector<std::string> args = {"kvbench", "run"};
  for (std::string& a : config.ForwardArgs()) args.push_back(std::move(a));
  args.insert(args.end(), {"--rank", std::to_string(rank), "--peer", peer});
  const pid_t launcher = getpid();
  pid_t pid = fork();
  if (pid != 0) return pid;
  // A launcher killed outright (SIGKILL: nothing to forward) still stops its ranks.
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (getppid() != launcher) _exit(kExitError);
  sigprocmask(SIG_SETMASK, &mask, nullptr);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  execv("/proc/self/exe", argv.data());
  fmt::print(stderr, "kvbench: cannot exec /proc/self/exe for rank {}\n", rank);
  _exit(kExitError);
}

int WaitExit(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  const int sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  if (sig != g_stop_signal)
    fmt::print(stderr, "kvbench: rank process {} died (signal {})\n", pid, sig);
  return kExitError;
}

}  // namespace

int SpawnRanks(const RunConfig& config) {
  auto port = PickFreePort();
  if (!port.ok()) {
    fmt::print(stderr, "kvbench: {}\n", port.status().message());
    return kExitError;
  }
  std::string peer = fmt::format("127.0.0.1:{}", port.value());
  if (config.transport == "local") return RunThreads(config, peer);
  StopForwarding forwarding;
  g_stop_signal = 0;
  g_ranks[0] = Spawn(config, 0, peer, forwarding.mask());
  g_ranks[1] = Spawn(config, 1, peer, forwarding.mask());
  forwarding.Unblock();
  const bool forked = g_ranks[0] > 0 && g_ranks[1] > 0;
  if (!forked) {
    fmt::print(stderr, "kvbench: fork failed\n");
    for (pid_t pid : g_ranks) {
      if (pid > 0) kill(pid, SIGTERM);
    }
  }
  int codes[2] = {kExitError, kExitError};
  for (int rank : {1, 0}) codes[rank] = g_ranks[rank] > 0 ? WaitExit(g_ranks[rank]) : kExitError;
  if (!forked) return kExitError;
  if (g_stop_signal != 0) {
    fmt::print(stderr, "kvbench: stopped by signal {}, passed on to both ranks\n",
               static_cast<int>(g_stop_signal));
    return 128 + g_stop_signal;
  }
  return std::max(codes[0], codes[1]);
}

}  // namespace kvbench
