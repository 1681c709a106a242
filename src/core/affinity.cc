#include "core/affinity.h"

#include <string>

namespace kvlane::core {

Status CheckWorkerCpus(const std::vector<int>& cpus) {
  if (cpus.empty()) return Status::Ok();
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0)
    return Status::Backend("sched_getaffinity failed: cannot check AgentOptions.worker_cpus");
  for (int cpu : cpus) {
    if (!CPU_ISSET(cpu, &allowed))
      return Status::InvalidArgument("AgentOptions.worker_cpus names CPU " + std::to_string(cpu) +
                                     ", which this thread may not run on");
  }
  return Status::Ok();
}

ScopedAffinity::ScopedAffinity(const std::vector<int>& cpus) {
  if (cpus.empty() || sched_getaffinity(0, sizeof(old_), &old_) != 0) return;
  cpu_set_t want;
  CPU_ZERO(&want);
  for (int cpu : cpus) CPU_SET(cpu, &want);  // in range: AgentOptions::Validate
  changed_ = sched_setaffinity(0, sizeof(want), &want) == 0;
}

ScopedAffinity::~ScopedAffinity() {
  if (changed_) (void)sched_setaffinity(0, sizeof(old_), &old_);
}

}  // namespace kvlane::core
