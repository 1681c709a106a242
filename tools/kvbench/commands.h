// The kvbench subcommands. Each registers itself on the CLI and, when it runs,
// stores the process exit code in *exit_code.
#pragma once

#include <CLI/CLI.hpp>

namespace kvbench {

void AddPlanCommand(CLI::App* app, int* exit_code);
void AddRunCommand(CLI::App* app, int* exit_code);
void AddSummarizeCommand(CLI::App* app, int* exit_code);

}  // namespace kvbench
