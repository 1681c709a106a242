// `kvbench run`: with no --rank, spawns both ranks on this host (the embedded
// default); with --rank 0|1 --peer HOST:PORT, runs one rank.
#include <fmt/format.h>

#include <memory>

#include "commands.h"
#include "common/die_by.h"
#include "common/stop_signal.h"
#include "launcher.h"
#include "rank.h"
#include "run_config.h"
#include "run_report.h"

namespace kvbench {

void AddRunCommand(CLI::App* app, int* exit_code) {
  auto config = std::make_shared<RunConfig>();
  CLI::App* cmd = app->add_subcommand(
      "run", "measure the grid between a target and an initiator, verify, write JSON");
  AddRunFlags(cmd, config.get());
  cmd->callback([config, exit_code] {
    kvlane::Status s = config->Resolve();
    // The initiator writes the document (the launcher checks for it before spawning).
    if (s.ok() && config->rank != kTargetRank) s = CheckOutputDir(config->out_dir);
    if (!s.ok()) {
      fmt::print(stderr, "kvbench run: {}\n", s.message());
      *exit_code = kExitError;
      return;
    }
    *exit_code = config->rank < 0 ? SpawnRanks(*config) : RunRank(*config);
    // A rank, or the local transport's rank threads, stopped by a signal: the clean-up
    // and the document are done, and it dies by the signal (a shell sees 128 + N).
    if (const int sig = kvlane_tools::StopSignal(); sig != 0) kvlane_tools::DieBy(sig);
  });
}

}  // namespace kvbench
