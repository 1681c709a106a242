// Renders a Plan as one JSON object or as text tables. Pure functions.
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>

#include "plan.h"

namespace kvbench {

nlohmann::json GroupsToJson(const Workload& workload);
nlohmann::json LayoutToJson(const PoolLayout& layout);
// {workload, options, groups, points, layout}.
nlohmann::json PlanToJson(const Plan& plan);
// PlanToJson's "points" alone.
nlohmann::json PointsToJson(const Plan& plan);
void PrintPlan(const Plan& plan, std::ostream& out);
// The batches the budgets shed, from PlanToJson's "points" (a document's
// workload.points), as one line: "not measured, shed by the budgets (batch
// (budget)): isl 8192: 64 (pool-budget), 128 (pool-budget); isl ..."; empty
// when none was shed (or `points` is no array: read as untrusted).
std::string ShedSummary(const nlohmann::json& points);

}  // namespace kvbench
