// Launcher: the embedded two-rank run on one host. Spawns rank 0 (target) and
// rank 1 (initiator) with a loopback control port: fork+exec of this binary, or
// two threads of this process for the local transport (same-process only).
#pragma once

#include "run_config.h"

namespace kvbench {

// Returns the worse of the two ranks' exit codes. A launcher stopped by SIGINT,
// SIGTERM or SIGHUP passes the signal on to both ranks (which end the run promptly,
// the initiator writing the rows that finished), waits for them and then,
// instead of returning, dies by that signal itself (a shell sees 128 + the signal,
// and a loop around kvbench stops on Ctrl-C). A second stop kills both ranks at once
// (SIGKILL) before it dies. One killed outright (SIGKILL) has its ranks sent SIGTERM.
// A rank that ends by a signal (killed so, whoever sent it) may have been writing
// the document: the temporary file it left in --out is removed before the rank is
// reaped (atomic_file.h: RemoveTemporaryFiles).
// With the local transport (two threads) the caller dies by the stop instead.
// The two ranks prove a shared control secret to each other (control_secret.h):
// config.secret (--secret-file), else a fresh random one; spawned ranks are handed
// it in their environment (kSpawnedSecretEnv), never on their command line.
int SpawnRanks(const RunConfig& config);

}  // namespace kvbench
