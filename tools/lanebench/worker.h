// The worker roles of lanebench. The orchestrator fork+execs lanebench itself as
// one source and one or two targets per run; they meet through the run directory
// (spec.json, metadata files) and talk through kvlane notifications.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "kvlane/agent.h"
#include "pinning.h"
#include "spec.h"

namespace lanebench {

inline constexpr uint32_t kSourceRank = 0;  // oracle rank of the source; target i is i + 1

std::string TargetName(int index);
std::string TargetMetaPath(const std::string& dir, int index);
std::string TargetAddrPath(const std::string& dir, int index);
std::string SourceMetaPath(const std::string& dir);

// An agent for `spec` named `name`: the spec's policy, transport and lanes;
// its threads on spec.worker_cpus (when pinning).
kvlane::Result<std::unique_ptr<kvlane::Agent>> MakeAgent(const RunSpec& spec,
                                                         const std::string& name);
std::chrono::milliseconds SpecTimeout(const RunSpec& spec);
// When a worker started now must be done: now + SpecTimeout(spec) +
// kWorkerGrace. A worker takes this once, first thing, and every wait of its run
// (files, control messages) ends by it: a peer answering just in time each round
// cannot stretch the run past it. The orchestrator kills the group at its own
// start + SpecTimeout(spec), before this: the kill, which names the timeout,
// comes first, and a target's own timeout cannot end a run the orchestrator is
// about to report as timed out as something else; the grace bounds a worker
// whose orchestrator is gone.
inline constexpr std::chrono::seconds kWorkerGrace{2};
std::chrono::steady_clock::time_point RunDeadline(const RunSpec& spec);
// When pinning: the calling thread (the worker's main thread, first thing)
// and every thread started from it run on spec.worker_cpus.
kvlane::Status EnterWorkerCpus(const RunSpec& spec);

// Process entry points; return the exit code.
int RunTarget(const std::string& dir, int index);
int RunSource(const std::string& dir);

}  // namespace lanebench
