// One rank of `kvbench run`, start to finish.
#pragma once

#include "run_config.h"

namespace kvbench {

// Exit codes of `kvbench run`.
inline constexpr int kExitValid = 0;
inline constexpr int kExitInvalid = 1;  // a row failed or was not verified
inline constexpr int kExitError = 2;    // setup, control plane or usage error

// Opens the session; the target serves the initiator; the initiator measures
// every row, writes the case document (after each row too, a checkpoint:
// document_writer.h) and prints the summary table. Once the
// session is open, a stop signal (SIGINT, SIGTERM, SIGHUP) ends the run promptly,
// the row in flight abandoned at its next safe point (row_runner.h), and the
// initiator writes the rows that finished, marked incomplete
// (none: no document); the caller then dies by it (common/stop_signal.h,
// kvlane_tools::StopSignal, then DieBy).
// REQUIRES: config.rank is 0 or 1 and config was Resolve()d.
int RunRank(const RunConfig& config);

}  // namespace kvbench
