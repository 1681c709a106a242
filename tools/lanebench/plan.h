// BenchConfig (the command line) and the plan it expands to: cases, each run
// once per arm by `pairs` fresh process groups, arm order rotating by pair.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kvlane/status.h"
#include "spec.h"

namespace lanebench {

struct BenchConfig {
  std::string transport = "tcp";   // tcp | shm | cuda
  std::string memory;              // host | device; empty: device for cuda
  std::string shape = "all";       // mixed | single | all
  std::string mixed_op = "write";  // read | write
  std::vector<std::string> single_ops = {"read", "write"};
  std::vector<uint64_t> single_bytes = {4096, 2u << 20};
  uint64_t bulk_bytes = 2u << 20;
  uint64_t small_bytes = 4096;
  int mixed_peers = 2;  // 2: one target process per transfer; 1: two lanes of one target
  int warmup = 20;
  int iters = 100;
  int pairs = 3;
  double timeout_s = 120;  // per process group
  // Engine workers (and the cuda proxy) stay awake this long after their last
  // work (AgentOptions::spin, cuda_proxy_idle_exit); -1: the engine's defaults.
  // Iterations are apart by their staging and verification, so with the
  // defaults lane threads not kept awake otherwise (on cuda: by a running
  // proxy) sleep between iterations.
  int64_t spin_us = -1;
  // The source's polling thread on a CPU of its own, every other thread of the
  // run on the others (pinning.h): on | off | auto (on with at least 4 CPUs).
  std::string pin = "auto";
  // cuda: AgentOptions::cuda_proxy_renew_every in us (0: no renewal); -1: the
  // engine's default. To see what the proxy's hand-overs cost the tail.
  int64_t proxy_renew_us = -1;
  // tcp, shm: AgentOptions::post_inline_bytes (0: the lane threads send every
  // frame); -1: the engine's default. To compare the two in one run.
  int64_t post_inline_bytes = -1;
  // Each source first spins this long on its polling thread's CPU, recording
  // the gaps when it did not run (stall_probe.h); 0: no probe.
  int stall_probe_ms = 100;
  // Each timed iteration starts at least this long after the previous one's
  // last completion (staging and verification count), so that every case
  // starts from equally idle lanes: a 2 MiB payload's staging alone takes
  // milliseconds, a 4 KiB one's microseconds, and on a VM a wake-up after
  // milliseconds of idle costs tens of microseconds more than one after a few
  // hundred. -1: 3000 on tcp and shm, 0 on cuda (its proxy would exit).
  int64_t idle_us = -1;
  int64_t ResolvedIdleUs() const;
  std::string json = "lanebench.json";
  // Testing only (fault.h): "none", or "flip-byte:N" (N a measured iteration, from 1;
  // "flip-byte": 1) to flip one received byte of that iteration in every run;
  // "flip-byte:N:small" (or ":bulk"; --shape mixed) of that transfer.
  std::string inject_fault = "none";

  kvlane::Status Validate() const;
  std::string ResolvedMemory() const;
};

// The arms: baseline first, candidate second.
inline constexpr const char* kBaseline = "global-fifo";
inline constexpr const char* kCandidate = "independent";
// Arm order of process pair `pair`: baseline first for even pairs, candidate first for odd.
std::vector<std::string> ArmOrder(int pair);
// The runs of a whole plan of `cases` cases: each case once per arm and process pair.
size_t PlannedRuns(const BenchConfig& cfg, size_t cases);

// One run of the plan: case `case_index` (of BuildCases) in arm `arm`, in process
// pair `pair`, `position` 0 when that arm runs first in its pair.
struct PlannedRun {
  size_t case_index = 0;
  std::string arm;
  int pair = 0;
  int position = 0;
};
// The order the runs go in: pair by pair; in each pair every case in BuildCases'
// order (the mixed case, then its isolation control, then the other single cases),
// each case's two arms back to back in ArmOrder(pair). So the isolation ratio's
// numerator and denominator are measured minutes apart at most, not a whole shape
// apart, and a drift of the host over the run hits both alike.
std::vector<PlannedRun> RunOrder(const BenchConfig& cfg, size_t cases);
// Every run's per-iteration series stay in memory until the document is written,
// and all of them go into it: about kRunIterationMemory and kRunIterationJson bytes
// per run and measured iteration (the mixed shape's). Past kManyRunIterations
// (about 0.6 GB of memory) lanebench warns before any run.
inline constexpr int64_t kRunIterationMemory = 600;
inline constexpr int64_t kRunIterationJson = 200;
inline constexpr int64_t kManyRunIterations = 1000000;
// PlannedRuns(cfg, cases) x cfg.iters.
int64_t PlannedRunIterations(const BenchConfig& cfg, size_t cases);

struct Case {
  std::string id;     // "mixed-write", "single-read-4KiB", ...
  std::string shape;  // "mixed" | "single"
  std::string op;
  uint64_t bytes = 0;  // single: transfer size; mixed: bulk + small
  RunSpec spec;        // everything but the policy
};

// Every case of cfg: the mixed one first, then its isolation control (if the single
// shape has it), then the other single ones, by op and size.
std::vector<Case> BuildCases(const BenchConfig& cfg);
// The mixed case's id ("mixed-write"), and the id of the single case its small
// transfer is compared with for the isolation ratio: the same op, the small size
// ("single-write-4KiB").
std::string MixedId(const BenchConfig& cfg);
std::string IsolationControlId(const BenchConfig& cfg);
// "4KiB", "2MiB", "1000B".
std::string SizeName(uint64_t bytes);

}  // namespace lanebench
