// Reading one source's result.json (source.cc writes it): whether the run is
// valid, and one per-iteration series of one transfer. Pure functions.
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

namespace lanebench {

// The run finished and every measured iteration verified.
bool RunValid(const nlohmann::json& result);
// result[series][name] (e.g. "lat_us", "small"); empty when absent.
std::vector<double> RunSeries(const nlohmann::json& result, const char* series, const char* name);

}  // namespace lanebench
