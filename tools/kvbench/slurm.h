// Two ranks under Slurm: `srun -n 2 kvbench run` needs no --rank/--peer. Rank
// comes from SLURM_PROCID and rank 0's address from the first host of the step's
// node list (port from KVBENCH_PORT, default 29517).
#pragma once

#include <string>

#include "kvlane/status.h"
#include "run_config.h"

namespace kvbench {

inline constexpr int kDefaultSlurmPort = 29517;

// The first host of a Slurm node list ("gpu[07-08,11],cpu1" -> "gpu07").
kvlane::Result<std::string> FirstSlurmHost(const std::string& nodelist);

// Fills rank and peer from Slurm's environment when the config names no rank
// and exactly two Slurm tasks run. Leaves the config alone outside Slurm.
kvlane::Status ApplySlurm(RunConfig* c);

// This process's index among the tasks on its host, as the launcher gives it:
// SLURM_LOCALID, else LOCAL_RANK (torchrun, mpirun wrappers); -1 when neither is
// set to a non-negative number.
int LocalRank();

}  // namespace kvbench
