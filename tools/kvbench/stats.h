// Stats: percentiles by the nearest-rank rule and decimal GB/s, as defined in
// docs/METHODOLOGY.md. Pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kvbench {

// Nearest rank: sorted[ceil(q * n) - 1] for q in (0, 1]; q <= 0 gives the minimum.
// REQUIRES: !values.empty().
double Percentile(std::vector<double> values, double q);

struct Summary {
  double p50 = 0;
  double p95 = 0;
  double min = 0;
  double max = 0;
  size_t n = 0;
};

// REQUIRES: !values.empty().
Summary Summarize(const std::vector<double>& values);

// Decimal gigabytes per second: bytes / seconds / 1e9. 0 when ms <= 0.
double GigabytesPerSecond(uint64_t bytes, double ms);

}  // namespace kvbench
