// A stop request (SIGTERM, SIGINT, SIGHUP) caught by the orchestrator. The handler only
// records the signal; the orchestrator reads it where it waits for its workers,
// stops and reaps them, removes its run directory, writes the runs that finished
// (marked stopped) and then dies by the signal itself (DieBy). Workers exec afresh
// and keep the default actions (spawn.h).
#pragma once

#include "common/die_by.h"
#include "common/stop_signal.h"

namespace lanebench {

// Installs the handlers for SIGTERM, SIGINT and SIGHUP (kvlane_tools::CatchStopSignals,
// common/stop_signal.h); a signal ignored at start (a background job's SIGINT) stays
// ignored, and a later stop replaces the one recorded.
inline void CatchStopSignals() { kvlane_tools::CatchStopSignals(kvlane_tools::LaterStop::kRecord); }
// The signal that asked this process to stop, or 0. Async-signal-safe.
using kvlane_tools::StopSignal;
// "SIGINT", "SIGTERM", ...; "signal N" for a number with no name.
using kvlane_tools::SignalName;

// After the clean-up: kvlane_tools::DieBy (common/die_by.h).
using kvlane_tools::DieBy;

}  // namespace lanebench
