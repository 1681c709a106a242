// The lanebench document: every run's values, the per-case medians, and the
// review table (baseline global-fifo vs candidate independent). Built from the
// run records alone; the printed report is rendered from the document alone.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "metrics.h"
#include "orchestrate.h"
#include "plan.h"

namespace lanebench {

// The whole document. `command` is the command line; `environment` from Environment().
// "complete": whether `records` holds every planned run.
Doc BuildDocument(const BenchConfig& cfg, const std::vector<Case>& cases,
                  const std::vector<RunRecord>& records, const std::string& command,
                  const Doc& environment);

// Marks `doc` as what a run stopped by `signal_name` ("SIGINT") left: outcome
// "stopped" and "stopped_by", beside "complete": false, so that nobody takes its
// medians (over the runs that finished) for a full result.
// REQUIRES: doc is BuildDocument's, "complete" false.
void MarkStopped(Doc* doc, const std::string& signal_name);

}  // namespace lanebench
