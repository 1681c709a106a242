// Plan: the ISL x batch grid a run measures, after shedding by the descriptor and
// pool budgets, and the one pool layout every point shares. Plain values.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kvlane/status.h"
#include "pool_layout.h"
#include "workload.h"

namespace kvbench {

inline constexpr uint64_t kGiB = 1ull << 30;
inline constexpr size_t kLadderFloor = 5;  // the smallest batches, never shed by descriptors
// Ladder values past these are refused (--isl, --batches): far beyond any
// serving shape, and they keep the plan's arithmetic and layout small.
inline constexpr uint64_t kMaxIsl = 1ull << 24;  // tokens
inline constexpr uint64_t kMaxBatch = 4096;

struct PlanOptions {
  std::vector<uint64_t> isl = {8192, 32768, 131072, 524288};
  std::vector<uint64_t> batches = {1, 2, 4, 8, 16, 32};
  uint64_t desc_budget = 65536;      // descriptors in one burst (batch x descs per request)
  uint64_t pool_budget = 64 * kGiB;  // pool bytes per rank
  uint64_t piece_bytes = 4 * kGiB;   // largest registration piece

  kvlane::Status Validate() const;
};

struct ShedBatch {
  uint64_t batch = 0;
  std::string reason;  // "desc-budget" or "pool-budget"
};

struct PlanPoint {
  uint64_t isl = 0;
  uint64_t descs = 0;               // per request
  uint64_t req_bytes = 0;           // per request
  std::vector<GroupDemand> demand;  // per group
  std::vector<uint64_t> batches;    // surviving, ascending
  std::vector<ShedBatch> shed;
  uint64_t pool_bytes = 0;  // pool this ISL alone needs at its largest surviving batch
};

struct Plan {
  Workload workload;
  PlanOptions options;
  std::vector<PlanPoint> points;  // one per ISL, ascending
  PoolLayout layout;              // shared by every point

  size_t Rows() const;  // surviving (isl, batch) pairs
};

// One row of a run: one op at one (ISL, batch) point of the plan.
struct RowKey {
  std::string op;  // "pull" | "push"
  uint64_t isl = 0;
  uint64_t batch = 0;
  bool operator==(const RowKey&) const = default;
};

// The rows a run of `plan` with `ops` measures, in the order it measures them: ISL
// ascending, then batch ascending, then the ops as given.
std::vector<RowKey> PlannedRows(const Plan& plan, const std::vector<std::string>& ops);

// Fails when the options are invalid or no point fits the budgets.
kvlane::Result<Plan> BuildPlan(const Workload& workload, const PlanOptions& options);

}  // namespace kvbench
