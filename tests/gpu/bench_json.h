// cuda_bench's results as one JSON document (--json PATH): every table row
// beside where and how it was measured (date, host, GPUs, driver, kvlane
// build, command line).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace kvlane::test {

// One row of the printed table; ratio = kvlane / reference.
struct BenchRow {
  std::string metric;
  double kvlane = 0, reference = 0;
  std::string unit;
};

// Date (UTC), hostname, GPU names, driver and runtime versions, kvlane version
// and git revision, and `command`.
nlohmann::json BenchProvenance(const std::string& command);

// Writes {"tool", "provenance", "run", "rows"} to `path` ("run" is `run` as
// given). Returns false, with a message on stderr, when the file cannot be written.
bool WriteBenchJson(const std::string& path, const std::string& command, const nlohmann::json& run,
                    const std::vector<BenchRow>& rows);

}  // namespace kvlane::test
