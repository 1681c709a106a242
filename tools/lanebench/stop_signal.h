// A stop request (SIGTERM, SIGINT, SIGHUP) caught by the orchestrator. The handler only
// records the signal; the orchestrator reads it where it waits for its workers,
// stops and reaps them, removes its run directory, writes the runs that finished
// (marked stopped) and then dies by the signal itself (DieBy). Workers exec afresh
// and keep the default actions (spawn.h).
#pragma once

#include <string>

#include "common/die_by.h"

namespace lanebench {

// Installs the handlers for SIGTERM, SIGINT and SIGHUP; a signal ignored at start (a
// background job's SIGINT) stays ignored.
void CatchStopSignals();
// The signal that asked this process to stop, or 0. Async-signal-safe.
int StopSignal();
// "SIGINT", "SIGTERM", ...; "signal N" for a number with no name.
std::string SignalName(int sig);

// After the clean-up: kvlane_tools::DieBy (common/die_by.h).
using kvlane_tools::DieBy;

}  // namespace lanebench
