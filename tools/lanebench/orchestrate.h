// The orchestrator: runs every case once per arm in `pairs` fresh process
// groups (one source, one or two targets), in RunOrder (plan.h): pair by pair.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "plan.h"

namespace lanebench {

struct RunRecord {
  std::string case_id;
  std::string arm;
  int pair = 0;
  int position = 0;       // 0: this arm ran first in its pair
  nlohmann::json result;  // the source's result.json (always has "ok"; "error" when not ok)
};

// Checks, in this process, that two agents limited to cfg.transport connect to
// each other (over host memory), then that cfg's memory can be allocated. An
// error means "not available".
kvlane::Status ProbeTransport(const BenchConfig& cfg);

// Runs the whole plan; one progress line per run on stderr. Once StopSignal()
// is set, stops the workers of the run in progress (SIGTERM, SIGKILL after
// kStopGrace: spawn.h) and reaps them, removes its directory and returns the runs
// completed before it.
std::vector<RunRecord> RunPlan(const BenchConfig& cfg, const std::vector<Case>& cases);

}  // namespace lanebench
