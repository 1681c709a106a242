// `kvbench plan`: prints the grid, the shedding and the pool layout; moves no byte.
#include <fmt/format.h>

#include <iostream>
#include <memory>

#include "commands.h"
#include "grid_flags.h"
#include "plan_report.h"

namespace kvbench {

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
    auto plan = PlanFromFlags(flags->grid, PlanOptions{});
    if (!plan.ok()) {
      fmt::print(stderr, "kvbench plan: {}\n", plan.status().message());
      *exit_code = 2;
      return;
    }
    if (flags->json) {
      std::cout << PlanToJson(plan.value()).dump(2) << "\n";
    } else {
      PrintPlan(plan.value(), std::cout);
    }
    *exit_code = 0;
  });
}

}  // namespace kvbench
