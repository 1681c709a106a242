// Fresh worker processes: fork + exec of this very binary in a worker role.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "kvlane/status.h"

namespace lanebench {

// Starts /proc/self/exe with `args` (argv[1..]); stdout and stderr are inherited.
kvlane::Result<pid_t> SpawnSelf(const std::vector<std::string>& args);
// Waits for `pid` until `deadline` (or until `give_up` returns true), then kills
// it (SIGKILL) and reaps it. Returns the exit code, 128 + signal when signalled,
// or -1 when it had to be killed.
int WaitOrKill(pid_t pid, std::chrono::steady_clock::time_point deadline,
               const std::function<bool()>& give_up = nullptr);

}  // namespace lanebench
