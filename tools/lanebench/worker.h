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
std::string TargetPidPath(const std::string& dir, int index);  // --inject-fault stop-peer
std::string SourceMetaPath(const std::string& dir);

// An agent for `spec` named `name`: the spec's policy, transport and lanes;
// its threads on spec.worker_cpus (when pinning).
kvlane::Result<std::unique_ptr<kvlane::Agent>> MakeAgent(const RunSpec& spec,
                                                         const std::string& name);
std::chrono::milliseconds SpecTimeout(const RunSpec& spec);
// When a target started now must be done: now + SpecTimeout(spec) +
// kWorkerGrace. A target takes this once, first thing, and every wait of its run
// (files, control messages) ends by it: a peer answering just in time each round
// cannot stretch the run past it. The orchestrator kills the group at its own
// start + SpecTimeout(spec), before this: the kill, which names the timeout,
// comes first, and a target's own timeout cannot end a run the orchestrator is
// about to report as timed out as something else; the grace bounds a worker
// whose orchestrator is gone.
inline constexpr std::chrono::seconds kWorkerGrace{2};
std::chrono::steady_clock::time_point RunDeadline(const RunSpec& spec);
// The source ends its own run earlier: every wait of its run ends by its start +
// SpecTimeout(spec) - SourceMargin(spec), before the orchestrator's kill (taken a
// little earlier than the source's start), so that a source whose transfer never
// completes, or whose run is too long for --timeout, writes what it gathered and
// why it stopped (its result: ok false) and exits before it is killed.
// SourceMargin: a quarter of the timeout, at most 1 s.
std::chrono::milliseconds SourceMargin(const RunSpec& spec);
std::chrono::steady_clock::time_point SourceDeadline(const RunSpec& spec);
// When pinning: the calling thread (the worker's main thread, first thing)
// and every thread started from it run on spec.worker_cpus.
kvlane::Status EnterWorkerCpus(const RunSpec& spec);

// Process entry points; return the exit code.
int RunTarget(const std::string& dir, int index);
int RunSource(const std::string& dir);

}  // namespace lanebench
