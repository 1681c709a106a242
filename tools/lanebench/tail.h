// Where a case's slow iterations came from. Over every valid run of one arm,
// the watched transfer ("small" in the mixed shape, "xfer" in the single one)
// is slow in an iteration when its latency is over twice its run's median.
// Each slow iteration is put down to what the source saw:
//   - stalled: the polling thread went 5 us or more without a look at the clock
//     between its Post() returning and the completion (source.cc: it did not run);
//   - slow post: Post() itself took 5 us or more (the engine's time);
//   - other: neither (the transfer itself, or the lanes, were slow).
// Also kept: the runs' host-stall probes (stall_probe.h), and the p99 over the
// iterations whose poller did not stall (pooled over the valid runs, as the
// isolation ratio's p99; and each run's own), a diagnostic beside the target's
// p99, never in its place.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "orchestrate.h"
#include "plan.h"

namespace lanebench {

inline constexpr double kStallUs = 5;     // a gap this long is a stall
inline constexpr double kSlowFactor = 2;  // slow: over this many times the run's median

// The watched transfer's name in a case of `shape`.
const char* WatchedXfer(const std::string& shape);
// One run's p99 of the watched transfer over iterations with a stall under kStallUs.
double UnstalledP99(const std::string& shape, const nlohmann::json& result);
// The tail summary of `arm` in case `c` (valid runs only; see the file comment).
nlohmann::ordered_json TailDoc(const Case& c, const std::string& arm,
                               const std::vector<RunRecord>& records);

}  // namespace lanebench
