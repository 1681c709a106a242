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

// RAII: the calling thread runs on `cpus` until destruction, then on its
// previous mask again. An empty list changes nothing. The kernel, not the
// calling thread's own mask, decides which CPUs are allowed.
class ScopedAffinity {
 public:
  // `every_cpu`: refuse (status()) a mask the kernel narrowed, a CPU of `cpus` it will
  // not run this process on (Create's check of the option); false: the rest is taken
  // (a channel opened after a CPU went offline, or the cpuset shrank, since Create).
  explicit ScopedAffinity(const std::vector<int>& cpus, bool every_cpu = true);
  ~ScopedAffinity();
  ScopedAffinity(const ScopedAffinity&) = delete;
  ScopedAffinity& operator=(const ScopedAffinity&) = delete;

  // Ok, or why the mask could not be narrowed to `cpus` (threads started
  // meanwhile would run elsewhere: the caller fails instead): InvalidArgument
  // naming the CPUs when the kernel runs this process on none of them, or, with
  // every_cpu, on some only (each one it will not: offline, or outside its cpuset).
  const Status& status() const { return status_; }

 private:
  Status status_;
  bool changed_ = false;
  cpu_set_t old_{};
};

}  // namespace kvlane::core
