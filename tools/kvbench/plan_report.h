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
void PrintPlan(const Plan& plan, std::ostream& out);

}  // namespace kvbench
