#include "metrics.h"

#include <cmath>

#include "run_result.h"
#include "stats.h"

namespace lanebench {

const std::vector<MetricDef>& MetricDefs(const std::string& shape) {
  static const std::vector<MetricDef> kMixed = {
      {"small_p50_us", "small p50 [us]"},         {"small_p99_us", "small p99 [us]"},
      {"bulk_p50_us", "bulk p50 [us]"},           {"bulk_p99_us", "bulk p99 [us]"},
      {"window_p50_us", "window p50 [us]"},       {"window_gbps", "window rate [GB/s]"},
      {"small_first_pct", "small done first [%]"}};
  static const std::vector<MetricDef> kSingle = {{"p50_us", "p50 [us]"}, {"p99_us", "p99 [us]"}};
  return shape == "mixed" ? kMixed : kSingle;
}

double SmallFirstPct(const nlohmann::json& result) {
  std::vector<double> small = RunSeries(result, "done_sweep", "small");
  std::vector<double> bulk = RunSeries(result, "done_sweep", "bulk");
  if (small.empty() || small.size() != bulk.size()) return NAN;
  int64_t first = 0;
  for (size_t i = 0; i < small.size(); ++i) first += small[i] < bulk[i] ? 1 : 0;
  return 100.0 * static_cast<double>(first) / static_cast<double>(small.size());
}

Doc RunMetrics(const Case& c, const nlohmann::json& result) {
  if (c.shape != "mixed") {
    std::vector<double> v = RunSeries(result, "lat_us", "xfer");
    return {{"p50_us", Percentile(v, 50)}, {"p99_us", Percentile(v, 99)}};
  }
  std::vector<double> small = RunSeries(result, "lat_us", "small");
  std::vector<double> bulk = RunSeries(result, "lat_us", "bulk");
  std::vector<double> window = result.value("window_us", std::vector<double>{});
  double w50 = Percentile(window, 50);
  return {{"small_p50_us", Percentile(small, 50)},
          {"small_p99_us", Percentile(small, 99)},
          {"bulk_p50_us", Percentile(bulk, 50)},
          {"bulk_p99_us", Percentile(bulk, 99)},
          {"window_p50_us", w50},
          {"window_gbps", static_cast<double>(c.bytes) / w50 / 1e3},
          {"small_first_pct", SmallFirstPct(result)}};
}

void PoolSeries(const nlohmann::json& result, nlohmann::json* pooled) {
  auto append = [](const nlohmann::json& from, nlohmann::json& to) {
    if (!from.is_array()) return;
    if (!to.is_array()) to = nlohmann::json::array();
    for (const nlohmann::json& x : from) to.push_back(x);
  };
  for (const char* key : {"lat_us", "done_us", "done_sweep", "post_us", "stall_us"}) {
    if (!result.contains(key) || !result[key].is_object()) continue;
    for (const auto& [name, series] : result[key].items()) append(series, (*pooled)[key][name]);
  }
  for (const char* key : {"window_us", "gap_us"})
    if (result.contains(key)) append(result[key], (*pooled)[key]);
}

}  // namespace lanebench
