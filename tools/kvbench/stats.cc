#include "stats.h"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace kvbench {

double Percentile(std::vector<double> values, double q) {
  assert(!values.empty());
  std::sort(values.begin(), values.end());
  if (q <= 0) return values.front();
  double rank = std::ceil(q * static_cast<double>(values.size()) - 1e-9);
  size_t index = rank < 1 ? 0 : static_cast<size_t>(rank) - 1;
  return values[std::min(index, values.size() - 1)];
}

Summary Summarize(const std::vector<double>& values) {
  assert(!values.empty());
  Summary s;
  s.p50 = Percentile(values, 0.50);
  s.p95 = Percentile(values, 0.95);
  s.min = *std::min_element(values.begin(), values.end());
  s.max = *std::max_element(values.begin(), values.end());
  s.n = values.size();
  return s;
}

double GigabytesPerSecond(uint64_t bytes, double ms) {
  if (ms <= 0) return 0;
  return static_cast<double>(bytes) / (ms * 1e-3) / 1e9;
}

}  // namespace kvbench
