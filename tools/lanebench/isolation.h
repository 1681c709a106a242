// The isolation ratio, issue 4's target: the mixed case's small-transfer p99 over
// the p99 of its single-lane control (the same op at the small size), per arm;
// beside it the same over iterations whose poller did not stall (tail.h), a
// diagnostic. Pure function over the document's cases; thread-safe.
#pragma once

#include <string>

#include "metrics.h"

namespace lanebench {

// One entry per arm (baseline first) when `cases` (the document's "cases") holds
// both the case `mixed_id` and the case `control_id`; an empty array otherwise.
Doc Isolation(const std::string& mixed_id, const std::string& control_id, const Doc& cases);

}  // namespace lanebench
