// Issue #6's speed targets, checked against cuda_bench's rows (the kvlane figure
// beside the reference measured in the same run): one verdict per target, so a
// run says at a glance which hold. The targets are set for two GPUs over NVLink;
// a run on one GPU (two processes sharing it) reports them as informational.
#pragma once

#include <string>
#include <vector>

#include "bench_json.h"

namespace kvlane::test {

struct TargetVerdict {
  std::string target;    // e.g. "4KiB write p99 <= 5 us"
  std::string measured;  // the figure compared, with the row it came from
  bool met = false;
  bool missing = false;  // the row was not measured in this run: neither met nor failed
};

// One verdict per target and op over `rows` (cuda_bench's Row names):
// contiguous 256 MiB and 1 GiB >= 0.98 x the reference (one-lane and striped);
// 4 KiB p50 <= 4 us and p99 <= 5 us; 4 KiB beside 2 MiB p99 <= 5 us with the
// bulk lane >= 0.95 x its solo rate; 2 MiB p50 and p99 <= 1.05 x the reference;
// 6,146 scattered 37,440 B descriptors >= 0.95 x kvlane's contiguous figure.
std::vector<TargetVerdict> CheckTargets(const std::vector<BenchRow>& rows);

// Prints the verdicts as a table, headed by whether they count (`gpus` >= 2) or
// are informational (one GPU); returns how many targets were not met.
int PrintTargets(const std::vector<TargetVerdict>& verdicts, int gpus);

}  // namespace kvlane::test
