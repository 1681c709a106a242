#include "result_check.h"

#include <string>

#include "common/json_text.h"

namespace lanebench {
namespace {

using nlohmann::json;

bool NumberArray(const json& v) {
  if (!v.is_array()) return false;
  for (const json& x : v)
    if (!x.is_number()) return false;
  return true;
}

bool SeriesObject(const json& v) {
  if (!v.is_object()) return false;
  for (const auto& [name, series] : v.items())
    if (!NumberArray(series)) return false;
  return true;
}

// The first field whose type is wrong, or "" when none. REQUIRES: r is an object.
std::string WrongField(json& r) {
  if (!r.contains("ok") || !r["ok"].is_boolean()) return "ok";
  for (const char* k : {"error", "warning", "first_failure", "transport"}) {
    if (!r.contains(k)) continue;
    if (!r[k].is_string()) return k;
    r[k] = kvlane_tools::Printable(r[k].get<std::string>(), 512);
  }
  for (const char* k : {"iterations", "verified", "warmup_verified", "failed", "poller_cpu"})
    if (r.contains(k) && !r[k].is_number_integer()) return k;
  if (r.contains("failed_iterations")) {
    if (!r["failed_iterations"].is_array()) return "failed_iterations";
    for (const json& x : r["failed_iterations"])
      if (!x.is_number_integer()) return "failed_iterations";
  }
  for (const char* k : {"window_us", "gap_us"})
    if (r.contains(k) && !NumberArray(r[k])) return k;
  for (const char* k : {"lat_us", "done_us", "done_sweep", "post_us", "stall_us"})
    if (r.contains(k) && !SeriesObject(r[k])) return k;
  if (r.contains("host_stalls")) {
    if (!r["host_stalls"].is_object()) return "host_stalls";
    for (const auto& [name, x] : r["host_stalls"].items())
      if (!x.is_number()) return "host_stalls";
  }
  return "";
}

// For a result that says "ok": why its counts do not add up, or "".
std::string Inconsistent(const json& r, const RunSpec& spec) {
  const int64_t iters = spec.iters;
  if (r.value("iterations", int64_t{-1}) != iters) return "iterations differ from the spec's";
  if (r.value("verified", int64_t{-1}) != iters) return "not every iteration verified";
  if (!r.contains("lat_us") || r["lat_us"].empty()) return "no latency series";
  for (const auto& [name, series] : r["lat_us"].items())
    if (static_cast<int64_t>(series.size()) != iters) return "a latency series lacks samples";
  return "";
}

}  // namespace

json CheckedResult(json result, const RunSpec& spec) {
  std::string why;
  if (!result.is_object()) {
    why = "not an object";
  } else if (std::string field = WrongField(result); !field.empty()) {
    why = "field '" + field + "' is not of its type";
  } else if (result["ok"].get<bool>()) {
    why = Inconsistent(result, spec);
  }
  if (why.empty()) return result;
  return json{{"ok", false}, {"error", "the source's result.json is malformed: " + why}};
}

int ExpectedSourceExit(const json& written) {
  const bool ok = written.is_object() && written.contains("ok") && written["ok"].is_boolean() &&
                  written["ok"].get<bool>();
  return ok ? 0 : 1;
}

}  // namespace lanebench
