#include "launcher.h"

#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
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

pid_t Spawn(const RunConfig& config, int rank, const std::string& peer) {
  std::vector<std::string> args = {"kvbench", "run"};
  for (std::string& a : config.ForwardArgs()) args.push_back(std::move(a));
  args.insert(args.end(), {"--rank", std::to_string(rank), "--peer", peer});
  pid_t pid = fork();
  if (pid != 0) return pid;
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
  fmt::print(stderr, "kvbench: rank process {} died (signal {})\n", pid,
             WIFSIGNALED(status) ? WTERMSIG(status) : 0);
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
  pid_t target = Spawn(config, 0, peer);
  pid_t initiator = Spawn(config, 1, peer);
  if (target < 0 || initiator < 0) {
    fmt::print(stderr, "kvbench: fork failed\n");
    return kExitError;
  }
  int initiator_code = WaitExit(initiator);
  int target_code = WaitExit(target);
  return std::max(initiator_code, target_code);
}

}  // namespace kvbench
