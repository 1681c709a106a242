#include "isolation.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

namespace lanebench {
namespace {

// Metric `key` of each valid run of `arm`, by process pair.
std::map<int, double> ByPair(const Doc& arm, const char* key) {
  std::map<int, double> v;
  for (const Doc& run : arm["runs"])
    if (run.value("valid", false)) v[run.value("pair", 0)] = run["metrics"].value(key, NAN);
  return v;
}

// Mixed over single within each pair, from pair 0 to the last pair either has.
std::vector<double> PairRatios(const Doc& mixed, const Doc& single) {
  const std::map<int, double> m = ByPair(mixed, "small_p99_us"), s = ByPair(single, "p99_us");
  int pairs = 0;
  for (const Doc* arm : {&mixed, &single})
    for (const Doc& run : (*arm)["runs"]) pairs = std::max(pairs, run.value("pair", 0) + 1);
  std::vector<double> ratios;
  for (int p = 0; p < pairs; ++p)
    ratios.push_back(m.count(p) && s.count(p) ? m.at(p) / s.at(p) : NAN);
  return ratios;
}

Doc ArmEntry(const char* arm, const std::string& control_id, const Doc& mixed, const Doc& single) {
  const double m = mixed["pooled"].value("small_p99_us", NAN);
  const double s = single["pooled"].value("p99_us", NAN);
  const std::vector<double> pairs = PairRatios(mixed, single);
  double lo = NAN, hi = NAN;
  for (double r : pairs)
    if (std::isfinite(r)) {
      lo = std::isnan(lo) ? r : std::min(lo, r);
      hi = std::isnan(hi) ? r : std::max(hi, r);
    }
  // Diagnostic beside the ratio: the same with stalled iterations left out.
  const double mu = mixed["tail"].value("p99_unstalled_us", NAN);
  const double su = single["tail"].value("p99_unstalled_us", NAN);
  return {{"arm", arm},
          {"mixed_small_p99_us", m},
          {"mixed_samples", mixed["pooled"].value("samples", 0)},
          {"single_case", control_id},
          {"single_p99_us", s},
          {"single_samples", single["pooled"].value("samples", 0)},
          {"ratio", m / s},
          {"ratio_runs", pairs},
          {"ratio_min", lo},
          {"ratio_max", hi},
          {"mixed_small_p99_unstalled_us", mu},
          {"single_p99_unstalled_us", su},
          {"ratio_unstalled", mu / su}};
}

}  // namespace

Doc Isolation(const std::string& mixed_id, const std::string& control_id, const Doc& cases) {
  const Doc* mixed = nullptr;
  const Doc* single = nullptr;
  for (const Doc& c : cases) {
    if (c["id"] == mixed_id) mixed = &c;
    if (c["id"] == control_id) single = &c;
  }
  Doc out = Doc::array();
  if (mixed == nullptr || single == nullptr) return out;
  for (const char* arm : {kBaseline, kCandidate})
    out.push_back(ArmEntry(arm, control_id, (*mixed)["arms"][arm], (*single)["arms"][arm]));
  return out;
}

}  // namespace lanebench
