// GridFlags: the command-line and environment knobs that choose a workload and a
// grid (shared by `kvbench plan` and `kvbench run`). Plain value.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "kvlane/status.h"
#include "plan.h"
#include "workload.h"

namespace kvbench {

struct GridFlags {
  WorkloadSpec workload;
  std::string preset = "quick";   // --grid: quick | full (GridPresetNamed)
  std::vector<uint64_t> isl;      // empty: the command's default ladder
  std::vector<uint64_t> batches;  // empty: the command's default ladder
  std::string desc_budget;        // empty: env KVBENCH_DESC_BUDGET, else the default
  std::string pool_budget;        // empty: env KVBENCH_POOL_BUDGET, else the default
};

// A named grid and its sampling. quick: the embedded default, about one minute on
// a 2-core host over shm; full: DESIGN.md's grid (2 warm-up, 16 samples x 3 trials).
struct GridPreset {
  std::vector<uint64_t> isl;
  std::vector<uint64_t> batches;
  int warmup = 0, samples = 0, trials = 0;
};
kvlane::Result<GridPreset> GridPresetNamed(const std::string& name);

// A CLI11 check that refuses a negative value of an unsigned flag, saying so
// ("'-5' is negative: ..."): CLI11 would read it as 2^64 - 5, and its own
// NonNegativeNumber names a range 309 digits long.
CLI::Validator NotNegative();
// Registers --workload --block --dtype --grid --isl --batches --desc-budget --pool-budget.
void AddGridFlags(CLI::App* app, GridFlags* flags);

// What `plan` and `run` both do before planning, so that `plan` shows what `run`
// measures: the ladders of flags->preset become the defaults' and, with neither
// --pool-budget nor KVBENCH_POOL_BUDGET, flags->pool_budget becomes the defaults'
// (64 GiB) capped at a quarter of the host memory this process may take (two ranks
// may share this host): MemAvailable, or a cgroup's headroom where smaller
// (host_memory.h).
// Returns whether the pool budget is that automatic one (a run on a device pool
// then derives its own from the GPU's free memory: session.h).
kvlane::Result<bool> ApplyGridDefaults(GridFlags* flags, PlanOptions* defaults);

// The automatic host pool budget: `default_budget` capped at a quarter of
// `host_bytes` (HostMemory::Bytes) and at least 1 B where that is known (a bound of
// 1 B, a cgroup with no room, is known: the plan then fails, naming the budget);
// `default_budget` where host_bytes is 0 (unknown).
uint64_t HostPoolBudget(uint64_t default_budget, uint64_t host_bytes);

// Parses "68719476736", "64GiB", "64G", "512MiB", "1T" (K/M/G/T are binary).
kvlane::Result<uint64_t> ParseBytes(const std::string& text);

// Parses a count of descriptors ("65536"): digits only, like --isl and --batches; a
// unit suffix ("64K") is InvalidArgument naming `source` (the flag or the variable).
kvlane::Result<uint64_t> ParseCount(const std::string& text, const std::string& source);

// Resolves flags, then environment, then `defaults` into plan options.
kvlane::Result<PlanOptions> ResolvePlanOptions(const GridFlags& flags, PlanOptions defaults);

// Makes the workload and the plan in one step.
kvlane::Result<Plan> PlanFromFlags(const GridFlags& flags, const PlanOptions& defaults);

}  // namespace kvbench
