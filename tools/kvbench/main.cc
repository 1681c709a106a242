// kvbench: the KV-cache handoff benchmark for kvlane. See docs/METHODOLOGY.md.
#include <CLI/CLI.hpp>

#include "commands.h"
#include "kvlane/agent.h"

int main(int argc, char** argv) {
  CLI::App app{"kvbench: measures moving LLM KV-cache between a target and an initiator"};
  app.set_version_flag("--version", kvlane::VersionString());
  app.require_subcommand(1);
  int exit_code = 0;
  kvbench::AddPlanCommand(&app, &exit_code);
  kvbench::AddRunCommand(&app, &exit_code);
  kvbench::AddSummarizeCommand(&app, &exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {  // --help is 0; a usage error is 2 (README)
    return app.exit(e) == 0 ? 0 : 2;
  }
  return exit_code;
}
