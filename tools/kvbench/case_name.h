// The default case name of a run: the name of its document in --out
// (<out>/<case>.json), so every setting that changes what a run measures, when it
// is not the default, is in it: runs of each setting into one --out keep their own
// documents instead of replacing each other's. Pure logic; thread-safe.
#pragma once

#include <string>

namespace kvbench {

// What names a case; each empty (or 0) part stands for its default.
struct CaseNameParts {
  std::string workload;      // "kv-dsv4", "kv-mla", "contig"
  int block = 0;             // the workload's block (kv-mla: page tokens)
  std::string dtype;         // kv-mla's element type; empty or "bf16": the default
  std::string path;          // PathLabel: "shm", "tcp-cuda", "tcp-cuda-host"
  std::string staging_copy;  // a staging rank's copy other than "batch"; empty: batch or none
  std::string policy;        // the progress policy; empty or "independent": the default
  int lanes = 0;             // --lanes; 0: the engine's default
};

// "<workload>-b<block>[-<dtype>]-<path>[-<staging copy>][-<policy>][-lanes<N>]", e.g.
// "kv-dsv4-b256-shm", "kv-mla-b16-fp8-tcp-cuda-kernel", "kv-dsv4-b256-shm-global-fifo-lanes4".
std::string DefaultCaseName(const CaseNameParts& parts);

}  // namespace kvbench
