// The last step of a tool stopped by a signal, shared by kvbench and lanebench.
#pragma once

namespace kvlane_tools {

// After the clean-up: flushes stdio, restores `sig`'s default action, unblocks it
// and raises it, so that whatever started the tool sees a process stopped by the
// signal, not one that exited (a shell stops a loop only for a command that died
// by SIGINT). Exits 128 + sig only if raising it returned.
[[noreturn]] void DieBy(int sig);

}  // namespace kvlane_tools
