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
  std::vector<uint64_t> isl;      // empty: the command's default ladder
  std::vector<uint64_t> batches;  // empty: the command's default ladder
  std::string desc_budget;        // empty: env KVBENCH_DESC_BUDGET, else the default
  std::string pool_budget;        // empty: env KVBENCH_POOL_BUDGET, else the default
};

// Registers --workload --block --dtype --isl --batches --desc-budget --pool-budget.
void AddGridFlags(CLI::App* app, GridFlags* flags);

// Parses "68719476736", "64GiB", "64G", "512MiB", "1T" (K/M/G/T are binary).
kvlane::Result<uint64_t> ParseBytes(const std::string& text);

// Resolves flags, then environment, then `defaults` into plan options.
kvlane::Result<PlanOptions> ResolvePlanOptions(const GridFlags& flags, PlanOptions defaults);

// Makes the workload and the plan in one step.
kvlane::Result<Plan> PlanFromFlags(const GridFlags& flags, const PlanOptions& defaults);

}  // namespace kvbench
