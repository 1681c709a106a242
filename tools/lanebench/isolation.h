// The isolation ratio, issue 4's target: the mixed case's small-transfer p99 over
// the p99 of its single-lane control (the same op at the small size), per arm.
// Each p99 is over the measured iterations of the arm's valid runs pooled (the
// arm's "pooled" metrics): p99 of 3 runs x 100 iterations is the 4th largest of
// 300 samples, not a median of three 2nd-largest ones. Beside it, the spread: the
// same ratio within each process pair (each run's own p99s, the two runs close in
// time: plan.h's RunOrder), with its min and max; and over iterations whose poller
// did not stall (tail.h), a diagnostic. Pure function over the document's cases;
// thread-safe.
#pragma once

#include <string>

#include "metrics.h"

namespace lanebench {

// One entry per arm (baseline first) when `cases` (the document's "cases", each
// arm with "pooled", "tail" and "runs") holds both the case `mixed_id` and the case
// `control_id`; an empty array otherwise. Per pair, "ratio_runs" holds NaN where
// either run is missing or invalid; "ratio_min" and "ratio_max" are over the others.
Doc Isolation(const std::string& mixed_id, const std::string& control_id, const Doc& cases);

}  // namespace lanebench
