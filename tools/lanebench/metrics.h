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

// Appends every per-iteration series of `result` (lat_us, done_us, done_sweep,
// post_us and stall_us per transfer; window_us and gap_us) to the same series of
// `*pooled` (an object; absent ones start empty). RunMetrics over the pooled
// series of several runs takes every percentile over all their iterations
// together: p99 of 3 x 100 samples is the 4th largest of 300, where each run's
// own p99 is its 2nd largest.
void PoolSeries(const nlohmann::json& result, nlohmann::json* pooled);

}  // namespace lanebench
