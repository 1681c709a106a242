// --pin: the source's polling thread gets a CPU of its own. The CPUs this
// process may use are split: the last for that thread, the rest for every other
// thread of the run (the engine's lane threads through AgentOptions::worker_cpus,
// the CUDA runtime's, the targets'). Without it the scheduler may put a lane
// thread it wakes on the poller's CPU, and each poll then waits for that thread.
#pragma once

#include <string>
#include <vector>

#include "kvlane/status.h"

namespace lanebench {

struct CpuSplit {
  int poller = -1;           // -1: no split (fewer than 2 CPUs)
  std::vector<int> workers;  // every other CPU this process may use
};

// The split of the calling thread's current mask.
CpuSplit SplitCpus();
// Resolves --pin ("auto": on with at least 4 CPUs) for this process.
bool PinResolved(const std::string& pin);
// The calling thread (and the threads it starts from now on) runs on `cpus`.
kvlane::Status RunOn(const std::vector<int>& cpus);
// "1-7,9": a CPU list as people write it.
std::string CpuListName(const std::vector<int>& cpus);

}  // namespace lanebench
