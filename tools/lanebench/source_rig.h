// SourceRig: the source process's agent, buffers and prepared transfers for one
// run. Built once by SetUpSource; driven by source.cc.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "buffers.h"
#include "control.h"
#include "kvlane/agent.h"
#include "spec.h"

namespace lanebench {

struct SourceXfer {
  XferSpec spec;
  uint8_t* local = nullptr;  // in rig.space
  kvlane::XferHandle handle;
};

struct SourceRig {
  RunSpec spec;
  std::string dir;  // the run directory
  kvlane::Op op = kvlane::Op::kWrite;
  std::unique_ptr<BufferSpace> space;  // declared before agent: outlives it
  std::unique_ptr<kvlane::Agent> agent;
  std::unique_ptr<ControlLink> link;
  std::vector<SourceXfer> xfers;
  std::vector<uint8_t> staging;  // host copy for fills and checks
  std::string transport;         // what the engine chose for the peers
  // Every wait of the run ends by it (SourceDeadline, taken when the rig is set up).
  std::chrono::steady_clock::time_point deadline;
};

// Creates the agent, registers buffers, meets the targets and prepares every
// transfer once. Fails when the engine picks a transport other than spec's.
kvlane::Result<std::unique_ptr<SourceRig>> SetUpSource(const RunSpec& spec, const std::string& dir);

}  // namespace lanebench
