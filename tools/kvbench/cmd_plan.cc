// `kvbench plan`: prints the grid, the shedding and the pool layout that `kvbench run`
// with the same flags measures; moves no byte.
#include <fmt/format.h>

#include <iostream>
#include <memory>

#include "commands.h"
#include "grid_flags.h"
#include "plan_report.h"

namespace kvbench {
namespace {

constexpr const char* kAutomaticBudgetNote =
    "pool budget: 64 GiB capped at a quarter of the host memory this process may take here "
    "(MemAvailable, or its cgroup memory limit less the cgroup's working set where smaller), as "
    "`kvbench run` sets it for a pool "
    "in host memory; a run derives a GPU pool's from that GPU's free memory, and two ranks "
    "take the smaller of their budgets (--pool-budget fixes it)";

}  // namespace

void AddPlanCommand(CLI::App* app, int* exit_code) {
  struct Flags {
    GridFlags grid;
    bool json = false;
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* cmd = app->add_subcommand("plan", "print the plan (grid, shedding, pool) and exit");
  AddGridFlags(cmd, &flags->grid);
  cmd->add_flag("--json", flags->json, "print one JSON object");
  cmd->callback([flags, exit_code] {
    // The same grid, defaults and budget rule as `kvbench run` (ApplyGridDefaults).
    PlanOptions defaults;
    auto automatic = ApplyGridDefaults(&flags->grid, &defaults);
    auto plan = automatic.ok() ? PlanFromFlags(flags->grid, defaults)
                               : kvlane::Result<Plan>(automatic.status());
    if (!plan.ok()) {
      fmt::print(stderr, "kvbench plan: {}\n", plan.status().message());
      *exit_code = 2;
      return;
    }
    if (flags->json) {
      std::cout << PlanToJson(plan.value()).dump(2) << "\n";
    } else {
      PrintPlan(plan.value(), std::cout);
      if (automatic.value()) std::cout << kAutomaticBudgetNote << "\n";
    }
    *exit_code = 0;
  });
}

}  // namespace kvbench
