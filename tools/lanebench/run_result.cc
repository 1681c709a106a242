#include "run_result.h"

namespace lanebench {

bool RunValid(const nlohmann::json& result) {
  return result.value("ok", false) &&
         result.value("verified", int64_t{0}) == result.value("iterations", int64_t{-1});
}

std::vector<double> RunSeries(const nlohmann::json& result, const char* series, const char* name) {
  if (!result.contains(series) || !result[series].contains(name)) return {};
  return result[series][name].get<std::vector<double>>();
}

}  // namespace lanebench
