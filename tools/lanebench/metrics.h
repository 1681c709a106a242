// The metrics of one run of a case, from its source's result alone: the per-run
// values the tables and medians are made of. Pure functions; thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "plan.h"

namespace lanebench {

using Doc = nlohmann::ordered_json;

struct MetricDef {
  const char* key;    // in a run's "metrics" and an arm's "median"
  const char* label;  // in the printed table
};

// The metrics of a case of `shape` ("mixed" or "single"), in table order.
const std::vector<MetricDef>& MetricDefs(const std::string& shape);

// Percent of iterations in which the small transfer was seen done in an earlier
// Check() sweep than the bulk one (result's done_sweep). NaN when either series is
// missing or they differ in length.
double SmallFirstPct(const nlohmann::json& result);

// Every metric of MetricDefs(c.shape) over `result`'s measured iterations:
// nearest-rank percentiles of lat_us (mixed: of each transfer) and window_us, the
// window rate c.bytes / window p50 (decimal GB/s), SmallFirstPct. NaN for a
// metric whose series is missing.
Doc RunMetrics(const Case& c, const nlohmann::json& result);

}  // namespace lanebench
