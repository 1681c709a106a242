// `kvbench summarize DIR... [--out DIR]`: tables and charts from documents alone.
#include <fmt/format.h>

#include <iostream>
#include <memory>

#include "commands.h"
#include "summarize.h"

namespace kvbench {

void AddSummarizeCommand(CLI::App* app, int* exit_code) {
  struct Flags {
    std::vector<std::string> inputs;
    std::string out = "kvbench-summary";
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* cmd = app->add_subcommand(
      "summarize", "render markdown tables and SVG charts (gnuplot) from case documents");
  cmd->add_option("inputs", flags->inputs,
                  "directories (read with the directories under them) or .json case documents; "
                  "each document counts once")
      ->required();
  cmd->add_option("--out", flags->out, "output directory")->capture_default_str();
  cmd->callback([flags, exit_code] {
    SummaryOutcome outcome = WriteSummary(flags->inputs, flags->out, std::cerr);
    if (!outcome.status.ok())
      fmt::print(stderr, "kvbench summarize: {}\n", outcome.status.message());
    *exit_code = outcome.exit_code;
  });
}

}  // namespace kvbench
