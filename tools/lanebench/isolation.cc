#include "isolation.h"

#include <cmath>

namespace lanebench {

Doc Isolation(const std::string& mixed_id, const std::string& control_id, const Doc& cases) {
  const Doc* mixed = nullptr;
  const Doc* single = nullptr;
  for (const Doc& c : cases) {
    if (c["id"] == mixed_id) mixed = &c;
    if (c["id"] == control_id) single = &c;
  }
  Doc out = Doc::array();
  if (mixed == nullptr || single == nullptr) return out;
  for (const char* arm : {kBaseline, kCandidate}) {
    double m = (*mixed)["arms"][arm]["median"].value("small_p99_us", NAN);
    double s = (*single)["arms"][arm]["median"].value("p99_us", NAN);
    // Diagnostic beside the ratio: the same with stalled iterations left out.
    double mu = (*mixed)["arms"][arm]["tail"].value("p99_unstalled_us", NAN);
    double su = (*single)["arms"][arm]["tail"].value("p99_unstalled_us", NAN);
    out.push_back({{"arm", arm},
                   {"mixed_small_p99_us", m},
                   {"single_case", control_id},
                   {"single_p99_us", s},
                   {"ratio", m / s},
                   {"mixed_small_p99_unstalled_us", mu},
                   {"single_p99_unstalled_us", su},
                   {"ratio_unstalled", mu / su}});
  }
  return out;
}

}  // namespace lanebench
