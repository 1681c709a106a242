// Placing the agent's own threads (AgentOptions::worker_cpus). Threads inherit
// the CPU mask of the thread that creates them, so the agent narrows the
// calling thread's mask to the worker CPUs while it starts transports and
// channels, and restores it after: every lane, server and listener thread (and
// the threads those start) runs on the worker CPUs only.
//
// Thread-safety: acts on the calling thread only.
#pragma once

#include <sched.h>

#include <vector>

#include "kvlane/status.h"

namespace kvlane::core {

// Fails (InvalidArgument, naming the CPU) when a CPU of `cpus` is not in this
// thread's current mask: the process may not run there (cgroup, taskset).
Status CheckWorkerCpus(const std::vector<int>& cpus);

// RAII: the calling thread runs on `cpus` until destruction, then on its
// previous mask again. An empty list changes nothing.
class ScopedAffinity {
 public:
  explicit ScopedAffinity(const std::vector<int>& cpus);
  ~ScopedAffinity();
  ScopedAffinity(const ScopedAffinity&) = delete;
  ScopedAffinity& operator=(const ScopedAffinity&) = delete;

 private:
  bool changed_ = false;
  cpu_set_t old_{};
};

}  // namespace kvlane::core
