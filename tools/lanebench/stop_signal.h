// A stop request (SIGTERM, SIGINT, SIGHUP) caught by the orchestrator. The handler only
// records the signal; the orchestrator reads it where it waits for its workers,
// stops and reaps them, removes its run directory, writes the runs that finished
// (marked stopped) and then dies by the signal itself (DieBy). Workers exec afresh
// and keep the default actions (spawn.h).
#pragma once

#include <string>

namespace lanebench {

// Installs the handlers for SIGTERM, SIGINT and SIGHUP; a signal ignored at start (a
// background job's SIGINT) stays ignored.
void CatchStopSignals();
// The signal that asked this process to stop, or 0. Async-signal-safe.
int StopSignal();
// "SIGINT", "SIGTERM", ...; "signal N" for a number with no name.
std::string SignalName(int sig);

// After the clean-up: flushes stdio, restores `sig`'s default action, unblocks it
// and raises it, so that whatever started lanebench sees a process stopped by the
// signal, not one that exited (a shell stops a loop only for a command that died
// by SIGINT). Exits 128 + sig only if raising it returned.
[[noreturn]] void DieBy(int sig);

}  // namespace lanebench
