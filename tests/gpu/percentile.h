// The percentile the GPU benchmark and probes report.
#pragma once

#include <algorithm>
#include <vector>

namespace kvlane::test {

// The p-th percentile of `v` (not empty): its sorted element at index
// p / 100 * size, rounded down, at most the last.
inline double Pct(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p / 100.0 * v.size()))];
}

}  // namespace kvlane::test
