// Order statistics used by lanebench's reports. Pure functions.
#pragma once

#include <vector>

namespace lanebench {

// Nearest-rank percentile: the ceil(p/100 * n)-th smallest value (p in (0, 100]).
// With n = 100, p99 is the 99th smallest. NaN for an empty input.
double Percentile(std::vector<double> v, double p);
// The middle value (the mean of the two middle ones for even n). NaN when empty.
double Median(std::vector<double> v);

}  // namespace lanebench
