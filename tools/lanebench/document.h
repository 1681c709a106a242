// The lanebench document: every run's values, the per-case medians, and the
// review table (baseline global-fifo vs candidate independent). Built from the
// run records alone; the printed report is rendered from the document alone.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "orchestrate.h"
#include "plan.h"

namespace lanebench {

using Doc = nlohmann::ordered_json;

// Per-run metrics of one source result of case `c`.
Doc RunMetrics(const Case& c, const nlohmann::json& result);

// The whole document. `command` is the command line; `environment` from Environment().
Doc BuildDocument(const BenchConfig& cfg, const std::vector<Case>& cases,
                  const std::vector<RunRecord>& records, const std::string& command,
                  const Doc& environment);

}  // namespace lanebench
