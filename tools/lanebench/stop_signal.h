// A stop request (SIGTERM, SIGINT, SIGHUP) caught by the orchestrator. The handler only
// records the signal; the orchestrator reads it where it waits for its workers,
// stops and reaps them, removes its run directory and exits 128 + the signal.
// Workers exec afresh and keep the default actions (spawn.h).
#pragma once

namespace lanebench {

// Installs the handlers for SIGTERM, SIGINT and SIGHUP; a signal ignored at start (a
// background job's SIGINT) stays ignored.
void CatchStopSignals();
// The signal that asked this process to stop, or 0. Async-signal-safe.
int StopSignal();

}  // namespace lanebench
