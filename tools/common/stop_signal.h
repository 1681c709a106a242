// A stop request (SIGTERM, SIGINT, SIGHUP) caught by a tool, shared by kvbench and
// lanebench. The handler only records the first signal; the tool reads it where it
// can stop cleanly, does its clean-up and then dies by the signal (die_by.h). What a
// later stop signal does is the tool's choice (LaterStop).
#pragma once

#include <string>

namespace kvlane_tools {

// What the handler does with a stop signal that comes after the first one.
enum class LaterStop {
  kRecord,  // records it in place of the first (lanebench: its clean-up is short anyway)
  kIgnore,  // nothing: a kvbench rank spawned by the launcher, which ends it on a second stop
  kDie,     // dies by it at once, skipping the clean-up: a second Ctrl-C to a kvbench rank
};

// Installs the handler for SIGTERM, SIGINT and SIGHUP; a signal ignored at start (a
// background job's SIGINT, nohup's SIGHUP) stays ignored. Calling it again (the two
// rank threads of one process) changes only what a later stop does.
void CatchStopSignals(LaterStop later);
// The first signal that asked this process to stop (or, with kRecord, the latest),
// or 0. Async-signal-safe.
int StopSignal();
// "SIGINT", "SIGTERM", ...; "signal N" for a number with no name.
std::string SignalName(int sig);

}  // namespace kvlane_tools
