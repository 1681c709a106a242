// Watching the processes a tool's test started, from /proc and waitpid: the
// stop tests of kvbench and lanebench (test support, not part of the tools).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <vector>

namespace kvlane_tools {

// The processes whose parent is `parent`, from /proc/<pid>/stat.
std::vector<pid_t> ChildrenOf(pid_t parent);
// No such process any more, or only its zombie.
bool Gone(pid_t pid);
// Waits up to `limit` for child `pid` to end; whether it did (*status then holds how).
bool EndsWithin(pid_t pid, std::chrono::seconds limit, int* status);
// Sends SIGINT to the process group of `shell` (a terminal's Ctrl-C) and waits
// up to `limit` for that child to end; whether it did (*status then holds how).
// One that did not is killed (SIGKILL to the group) and reaped.
bool CtrlCEndsWithin(pid_t shell, std::chrono::seconds limit, int* status);

}  // namespace kvlane_tools
