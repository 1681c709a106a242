#include "plan.h"

#include <algorithm>
#include <string>

namespace kvbench {
namespace {

std::vector<uint64_t> SortedUnique(std::vector<uint64_t> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

PlanPoint MakePoint(const Workload& w, uint64_t isl, const PlanOptions& o) {
  PlanPoint p;
  p.isl = isl;
  p.demand = w.Demand(isl);
  p.descs = w.RequestDescs(isl);
  p.req_bytes = w.RequestBytes(isl);
  std::vector<uint64_t> ladder = SortedUnique(o.batches);
  for (size_t i = 0; i < ladder.size(); ++i) {
    bool floor = i < kLadderFloor;
    if (!floor && ladder[i] * p.descs > o.desc_budget) {
      p.shed.push_back({ladder[i], "desc-budget"});
    } else {
      p.batches.push_back(ladder[i]);
    }
  }
  return p;
}

std::vector<BurstShape> Shapes(const std::vector<PlanPoint>& points) {
  std::vector<BurstShape> shapes;
  for (const PlanPoint& p : points) {
    if (!p.batches.empty()) shapes.push_back({p.batches.back(), p.demand});
  }
  return shapes;
}

// The point whose largest surviving burst holds the most bytes; nullptr if none.
PlanPoint* LargestBurst(std::vector<PlanPoint>& points) {
  PlanPoint* best = nullptr;
  for (PlanPoint& p : points) {
    if (p.batches.empty()) continue;
    if (!best || p.batches.back() * p.req_bytes >= best->batches.back() * best->req_bytes) {
      best = &p;
    }
  }
  return best;
}

kvlane::Status ShedForPool(const Workload& w, Plan* plan) {
  while (true) {
    KVLANE_ASSIGN_OR_RETURN(
        plan->layout, BuildPoolLayout(w.groups(), Shapes(plan->points), plan->options.piece_bytes));
    PlanPoint* p = LargestBurst(plan->points);
    if (p && plan->layout.bytes <= plan->options.pool_budget) return kvlane::Status::Ok();
    if (p == nullptr) break;
    p->shed.push_back({p->batches.back(), "pool-budget"});
    p->batches.pop_back();
  }
  uint64_t batch = SortedUnique(plan->options.batches).front();
  const PlanPoint& smallest = plan->points.front();
  return kvlane::Status::InvalidArgument("no point fits the pool budget of " +
                                         std::to_string(plan->options.pool_budget) +
                                         " B: the smallest burst (batch " + std::to_string(batch) +
                                         " at ISL " + std::to_string(smallest.isl) + ") needs " +
                                         std::to_string(batch * smallest.req_bytes) + " B");
}

kvlane::Status SizePoints(const Workload& w, Plan* plan) {
  for (PlanPoint& p : plan->points) {
    KVLANE_ASSIGN_OR_RETURN(PoolLayout alone,
                            BuildPoolLayout(w.groups(), Shapes({p}), plan->options.piece_bytes));
    p.pool_bytes = alone.bytes;
  }
  return kvlane::Status::Ok();
}

}  // namespace

kvlane::Status PlanOptions::Validate() const {
  if (isl.empty()) return kvlane::Status::InvalidArgument("the ISL ladder is empty");
  if (batches.empty()) return kvlane::Status::InvalidArgument("the batch ladder is empty");
  for (uint64_t v : isl) {
    if (v == 0 || v > kMaxIsl)
      return kvlane::Status::InvalidArgument("--isl " + std::to_string(v) + ": need 1.." +
                                             std::to_string(kMaxIsl) + " tokens");
  }
  for (uint64_t v : batches) {
    if (v == 0 || v > kMaxBatch)
      return kvlane::Status::InvalidArgument("--batches " + std::to_string(v) + ": need 1.." +
                                             std::to_string(kMaxBatch));
  }
  if (desc_budget == 0 || pool_budget == 0 || piece_bytes == 0) {
    return kvlane::Status::InvalidArgument("budgets and the piece size must be positive");
  }
  return kvlane::Status::Ok();
}

size_t Plan::Rows() const {
  size_t n = 0;
  for (const PlanPoint& p : points) n += p.batches.size();
  return n;
}

std::vector<RowKey> PlannedRows(const Plan& plan, const std::vector<std::string>& ops) {
  std::vector<RowKey> rows;
  for (const PlanPoint& p : plan.points) {
    for (uint64_t batch : p.batches) {
      for (const std::string& op : ops) rows.push_back({op, p.isl, batch});
    }
  }
  return rows;
}

kvlane::Result<Plan> BuildPlan(const Workload& workload, const PlanOptions& options) {
  KVLANE_RETURN_IF_ERROR(options.Validate());
  Plan plan{workload, options, {}, {}};
  for (uint64_t isl : SortedUnique(options.isl)) {
    plan.points.push_back(MakePoint(workload, isl, options));
  }
  KVLANE_RETURN_IF_ERROR(ShedForPool(workload, &plan));
  KVLANE_RETURN_IF_ERROR(SizePoints(workload, &plan));
  return plan;
}

}  // namespace kvbench
