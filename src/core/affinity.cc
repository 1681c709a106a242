#include "core/affinity.h"

#include <string>

#include "core/sys.h"

namespace kvlane::core {

ScopedAffinity::ScopedAffinity(const std::vector<int>& cpus) {
  if (cpus.empty()) return;
  if (sched_getaffinity(0, sizeof(old_), &old_) != 0) {
    status_ = ErrnoStatus("sched_getaffinity", errno);
    return;
  }
  cpu_set_t want;
  CPU_ZERO(&want);
  for (int cpu : cpus) CPU_SET(cpu, &want);  // in range: AgentOptions::Validate
  if (sched_setaffinity(0, sizeof(want), &want) != 0) {
    const int err = errno;
    std::string names;
    for (int cpu : cpus) names += (names.empty() ? "" : ",") + std::to_string(cpu);
    status_ = Status::InvalidArgument("AgentOptions.worker_cpus (CPU " + names +
                                      "): this process may not run there: " +
                                      ErrnoStatus("sched_setaffinity", err).message());
    return;
  }
  changed_ = true;
}

ScopedAffinity::~ScopedAffinity() {
  if (changed_) (void)sched_setaffinity(0, sizeof(old_), &old_);
}

}  // namespace kvlane::core
