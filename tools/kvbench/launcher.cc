#include "launcher.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "atomic_file.h"
#include "common/die_by.h"
#include "common/stop_signal.h"
#include "control_channel.h"
#include "control_secret.h"
#include "rank.h"

namespace kvbench {
namespace {

RunConfig ForRank(const RunConfig& config, int rank, const std::string& peer, int listen_fd = -1) {
  RunConfig c = config;
  c.rank = rank;
  c.peer = peer;
  c.listen_fd = listen_fd;
  return c;
}

// `listen_fd`: rank 0's control listener, handed over (its session closes it).
int RunThreads(const RunConfig& config, const std::string& peer, int listen_fd) {
  int codes[2] = {kExitError, kExitError};
  std::thread target([&] { codes[0] = RunRank(ForRank(config, 0, peer, listen_fd)); });
  codes[1] = RunRank(ForRank(config, 1, peer));
  target.join();
  return std::max(codes[0], codes[1]);
}

// The spawned ranks not yet reaped, for ForwardStop; set and cleared while the
// stop signals are blocked.
volatile sig_atomic_t g_ranks[2] = {-1, -1};
volatile sig_atomic_t g_stop_signal = 0;   // the first stop signal
volatile sig_atomic_t g_killed_ranks = 0;  // a second one came: the ranks were killed
constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGHUP};

// A launcher stopped by SIGINT, SIGTERM or SIGHUP passes the signal on to both
// ranks (async-signal-safe: kill only), so that none keeps running on its own: they
// end the run promptly and the initiator writes the rows that finished. A
// second stop kills both at once (SIGKILL; a spawned rank ignores a second stop
// signal itself, which a Ctrl-C also sends it directly).
extern "C" void ForwardStop(int sig) {
  const int saved = errno;
  const bool again = g_stop_signal != 0;
  if (again) {
    g_killed_ranks = 1;
  } else {
    g_stop_signal = sig;
  }
  // The initiator (rank 1) first: its own signal, not the target's notice of
  // one, is what it should see first (it names the rank that stopped).
  for (int i = 1; i >= 0; --i) {
    const pid_t pid = g_ranks[i];
    if (pid > 0) kill(pid, again ? SIGKILL : sig);
  }
  errno = saved;
}

// Blocks the stop signals and installs ForwardStop; restores both when it goes.
// Spawn happens while they are blocked, so a signal waits until the pids are known.
// A signal ignored when kvbench started (nohup, a background job in a script)
// stays ignored, for the launcher and its ranks.
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
    for (int sig : kStopSignals) sigaddset(&forward.sa_mask, sig);  // one handler at a time
    for (size_t i = 0; i < std::size(kStopSignals); ++i) {
      sigaction(kStopSignals[i], nullptr, &old_[i]);
      if (old_[i].sa_handler != SIG_IGN) sigaction(kStopSignals[i], &forward, nullptr);
    }
  }
  ~StopForwarding() {
    for (size_t i = 0; i < std::size(kStopSignals); ++i)
      sigaction(kStopSignals[i], &old_[i], nullptr);
    sigprocmask(SIG_SETMASK, &mask_, nullptr);
    g_ranks[0] = -1;
    g_ranks[1] = -1;
  }
  // In a spawned rank, before exec: the dispositions and the mask kvbench
  // started with (async-signal-safe calls only).
  void RestoreInChild() const {
    for (size_t i = 0; i < std::size(kStopSignals); ++i)
      sigaction(kStopSignals[i], &old_[i], nullptr);
    sigprocmask(SIG_SETMASK, &mask_, nullptr);
  }
  // Blocks (true) or unblocks the stop signals.
  static void Block(bool block) {
    sigset_t stop;
    sigemptyset(&stop);
    for (int sig : kStopSignals) sigaddset(&stop, sig);
    sigprocmask(block ? SIG_BLOCK : SIG_UNBLOCK, &stop, nullptr);
  }

 private:
  sigset_t mask_;
  struct sigaction old_[std::size(kStopSignals)];
};

// `listen_fd` (rank 0; -1 for rank 1): the control listener the rank inherits.
pid_t Spawn(const RunConfig& config, int rank, const std::string& peer,
            const StopForwarding& forwarding, int listen_fd) {
  std::vector<std::string> args = {"kvbench", "run"};
  for (std::string& a : config.ForwardArgs()) args.push_back(std::move(a));
  args.insert(args.end(), {"--rank", std::to_string(rank), "--peer", peer, "--spawned"});
  // The environment for exec, built before the fork (the child only execs): this
  // process's, with the ranks' control secret (RunConfig::secret) handed over.
  std::vector<std::string> env;
  const std::string secret_var = std::string(kSpawnedSecretEnv) + "=";
  const std::string listen_var = std::string(kSpawnedListenFdEnv) + "=";
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view var(*e);
    if (!var.starts_with(secret_var) && !var.starts_with(listen_var)) env.emplace_back(*e);
  }
  env.push_back(secret_var + ToHex(config.secret));
  if (listen_fd >= 0) env.push_back(listen_var + std::to_string(listen_fd));
  std::vector<char*> envp;
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t launcher = getpid();
  // Between fork and exec only async-signal-safe calls (another thread may hold
  // the allocator's or stdio's lock): the message is made here, written with write.
  const std::string exec_failed =
      fmt::format("kvbench: cannot exec /proc/self/exe for rank {}\n", rank);
  pid_t pid = fork();
  if (pid != 0) return pid;
  // A launcher killed outright (SIGKILL: nothing to forward) still stops its ranks.
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (getppid() != launcher) _exit(kExitError);
  if (listen_fd >= 0 && fcntl(listen_fd, F_SETFD, 0) != 0) _exit(kExitError);  // kept by exec
  forwarding.RestoreInChild();
  execve("/proc/self/exe", argv.data(), envp.data());
  (void)!write(STDERR_FILENO, exec_failed.data(), exec_failed.size());
  _exit(kExitError);
}

// A rank that did not exit (killed, by this launcher's second stop or by anyone
// else) may have been writing the document: removes the temporary file it left in
// `out_dir`. REQUIRES: `pid` not yet reaped, so no other process can have its pid.
void RemoveLeftovers(pid_t pid, const siginfo_t& info, const std::string& out_dir) {
  if (info.si_code == CLD_EXITED) return;  // an exit removes its own (atomic_file.h)
  const int removed = RemoveTemporaryFiles(out_dir, pid);
  if (removed > 0) {
    fmt::print(stderr, "kvbench: removed {} temporary file(s) of rank process {} from {}\n",
               removed, pid, out_dir);
  }
}

// Waits for rank `rank` to end, removes what it left half-written, then reaps it
// with the stop signals blocked and its pid cleared first, so ForwardStop never
// signals a reaped (reusable) pid.
int WaitExit(int rank, const std::string& out_dir) {
  const pid_t pid = g_ranks[rank];
  siginfo_t info{};
  while (waitid(P_PID, pid, &info, WEXITED | WNOWAIT) < 0 && errno == EINTR) {
  }
  RemoveLeftovers(pid, info, out_dir);
  StopForwarding::Block(true);
  g_ranks[rank] = -1;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  StopForwarding::Block(false);
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  const int sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  if (sig != g_stop_signal && !(sig == SIGKILL && g_killed_ranks))
    fmt::print(stderr, "kvbench: rank process {} died (signal {})\n", pid, sig);
  return kExitError;
}

// Spawns both ranks and waits for them, forwarding a stop (g_stop_signal says which).
// The stop dispositions and mask are kvbench's own again on return: a stop that
// comes later has its default action.
// `listener`: rank 0's control listener; rank 0 inherits it, this process closes
// its own copy once both ranks are spawned.
int SpawnAndWait(const RunConfig& config, const std::string& peer,
                 std::unique_ptr<ControlListener> listener) {
  StopForwarding forwarding;
  g_stop_signal = 0;
  g_killed_ranks = 0;
  g_ranks[0] = Spawn(config, 0, peer, forwarding, listener->fd());
  g_ranks[1] = Spawn(config, 1, peer, forwarding, -1);
  listener.reset();
  StopForwarding::Block(false);  // delivers a stop that came meanwhile: the ranks are known
  const pid_t spawned[2] = {g_ranks[0], g_ranks[1]};
  const bool forked = spawned[0] > 0 && spawned[1] > 0;
  if (!forked) {
    fmt::print(stderr, "kvbench: fork failed\n");
    for (pid_t pid : spawned) {
      if (pid > 0) kill(pid, SIGTERM);
    }
  }
  int codes[2] = {kExitError, kExitError};
  for (int rank : {1, 0}) {
    codes[rank] = spawned[rank] > 0 ? WaitExit(rank, config.out_dir) : kExitError;
  }
  return forked ? std::max(codes[0], codes[1]) : kExitError;
}

}  // namespace

int SpawnRanks(const RunConfig& given) {
  RunConfig config = given;
  if (config.secret.empty()) {  // ranks of one launcher share a fresh secret
    auto fresh = RandomBytes(32);
    if (!fresh.ok()) {
      fmt::print(stderr, "kvbench: {}\n", fresh.status().message());
      return kExitError;
    }
    config.secret = std::move(fresh).value();
  }
  // Rank 0's control listener, opened here before either rank starts: no other
  // process can take its port in between (as one could a port picked free and
  // bound later), and rank 1's first connect finds it listening.
  auto listener = ControlListener::Listen("127.0.0.1:0");
  auto port =
      listener.ok() ? listener.value()->Port() : kvlane::Result<uint16_t>(listener.status());
  if (!port.ok()) {
    fmt::print(stderr, "kvbench: {}\n", port.status().message());
    return kExitError;
  }
  std::string peer = fmt::format("127.0.0.1:{}", port.value());
  if (config.transport == "local") return RunThreads(config, peer, listener.value()->Release());
  const int code = SpawnAndWait(config, peer, std::move(listener).value());
  const int stop_signal = g_stop_signal;
  if (stop_signal == 0) return code;
  if (g_killed_ranks) {
    fmt::print(stderr, "kvbench: stopped by {} twice: both ranks killed at once\n",
               kvlane_tools::SignalName(stop_signal));
  } else {
    fmt::print(stderr, "kvbench: stopped by {}, passed on to both ranks\n",
               kvlane_tools::SignalName(stop_signal));
  }
  kvlane_tools::DieBy(stop_signal);
}

}  // namespace kvbench
