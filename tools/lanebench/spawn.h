// Fresh worker processes: fork + exec of this very binary in a worker role.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "kvlane/status.h"

namespace lanebench {

// How long a process asked to stop (SIGTERM) has to end before it is killed (SIGKILL).
inline constexpr std::chrono::seconds kStopGrace{1};

// Starts /proc/self/exe with `args` (argv[1..]); stdout and stderr are inherited.
kvlane::Result<pid_t> SpawnSelf(const std::vector<std::string>& args);
// Waits for `pid`. At `deadline`, or once `give_up` returns true, kills it (SIGKILL)
// at once; once `stopping` returns true, asks it to stop first (SIGTERM) and kills it
// only if it has not ended kStopGrace later. Reaps it either way. Returns the exit
// code, 128 + signal when signalled (SIGTERM's for one that ended when asked), or -1
// when it had to be killed.
int WaitOrKill(pid_t pid, std::chrono::steady_clock::time_point deadline,
               const std::function<bool()>& give_up = nullptr,
               const std::function<bool()>& stopping = nullptr);

}  // namespace lanebench
