// Order statistics used by lanebench's reports. Pure functions.
#pragma once

#include <vector>

namespace lanebench {

// Both leave out every value that is not finite (NaN, +-inf: a run with no
// sample, a series that did not line up) before ordering: a NaN breaks the
// sort's ordering, and the answer would depend on where it stood.
// Nearest-rank percentile: the ceil(p/100 * n)-th smallest of the n finite values
// (p in (0, 100]). With n = 100, p99 is the 99th smallest. NaN when none is finite.
double Percentile(std::vector<double> v, double p);
// The middle finite value (the mean of the two middle ones for even n). NaN when
// none is finite.
double Median(std::vector<double> v);

}  // namespace lanebench
