// The default case name of a run: the name of its document in --out
// (<out>/<case>.json), so every setting that changes what a run measures, when it
// is not the default, is in it: runs of each setting into one --out keep their own
// documents instead of replacing each other's. The budgets (--desc-budget,
// --pool-budget) are not: they only shed rows, and the document records them and
// the rows they shed (workload.options, each point's shedding), so they change how
// much of a grid runs, not what a row measures.
// Pure logic; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kvbench {

// What names a case; each empty (or 0) part stands for its default.
struct CaseNameParts {
  std::string workload;           // "kv-dsv4", "kv-mla", "contig"
  int block = 0;                  // the workload's block (kv-mla: page tokens)
  std::string dtype;              // kv-mla's element type; empty or "bf16": the default
  std::string path;               // PathLabel: "shm", "tcp-cuda", "tcp-cuda-host"
  std::string staging_copy;       // a staging rank's copy other than "batch"; empty: batch or none
  std::string policy;             // the progress policy; empty or "independent": the default
  int lanes = 0;                  // --lanes; 0: the engine's default
  std::string grid;               // --grid, the preset; empty or "quick": the default
  std::vector<uint64_t> isl;      // --isl where it differs from the preset's (ChangedLadder)
  std::vector<uint64_t> batches;  // --batches likewise; empty: the preset's
  std::vector<std::string> ops;   // --ops; one op is named, both (either order) are the default
};

// The ladder `given` (--isl, --batches) as the plan measures it, ascending without
// repeats; empty where `given` is empty (the flag left out) or measures the same
// values as `preset`, the preset's ladder ("32768,8192" is quick's "8192,32768").
std::vector<uint64_t> ChangedLadder(std::vector<uint64_t> given, std::vector<uint64_t> preset);

// A ladder's part of a name, ascending without repeats: each value a multiple of
// 1048576 as "<n>m", else of 1024 as "<n>k", else its digits, joined by "_"
// ("8k_32k", "1_2_4", "1000_1m"). Past 48 characters it is
// "<first>-<last>x<count>-<hash>" ("1000-1100x101-4fa6f14a"), <hash> the low 32 bits
// of the 64-bit FNV-1a hash of the long form's bytes as 8 hex digits: short, and
// ladders alike in their ends and length still differ (but for a 1 in 2^32 chance).
std::string LadderLabel(std::vector<uint64_t> ladder);

// "<workload>-b<block>[-<dtype>]-<path>[-<staging copy>][-<policy>][-lanes<N>][-<grid>]
// [-isl<ladder>][-b<ladder>][-<op>]", e.g. "kv-dsv4-b256-shm",
// "kv-mla-b16-fp8-tcp-cuda-kernel", "kv-dsv4-b256-shm-global-fifo-lanes4",
// "kv-dsv4-b256-shm-full", "kv-dsv4-b256-shm-isl8k-b1_2-pull".
std::string DefaultCaseName(const CaseNameParts& parts);

}  // namespace kvbench
