#include "stats.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace lanebench {
namespace {

// `v` without its non-finite values, sorted.
std::vector<double> FiniteSorted(std::vector<double> v) {
  v.erase(std::remove_if(v.begin(), v.end(), [](double x) { return !std::isfinite(x); }), v.end());
  std::sort(v.begin(), v.end());
  return v;
}

}  // namespace

double Percentile(std::vector<double> v, double p) {
  v = FiniteSorted(std::move(v));
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
  return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
}

double Median(std::vector<double> v) {
  v = FiniteSorted(std::move(v));
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace lanebench
