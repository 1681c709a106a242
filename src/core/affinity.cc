#include "core/affinity.h"

#include <string>

#include "core/sys.h"

namespace kvlane::core {
namespace {

std::string CpuNames(const std::vector<int>& cpus) {
  std::string names;
  for (int cpu : cpus) names += (names.empty() ? "" : ",") + std::to_string(cpu);
  return names;
}

Status Refused(const std::vector<int>& cpus, const std::string& why) {
  return Status::InvalidArgument("AgentOptions.worker_cpus (CPU " + CpuNames(cpus) +
                                 "): this process may not run there" + why);
}

}  // namespace

ScopedAffinity::ScopedAffinity(const std::vector<int>& cpus, bool every_cpu) {
  if (cpus.empty()) return;
  if (sched_getaffinity(0, sizeof(old_), &old_) != 0) {
    status_ = ErrnoStatus("sched_getaffinity", errno);
    return;
  }
  cpu_set_t want;
  CPU_ZERO(&want);
  for (int cpu : cpus) CPU_SET(cpu, &want);  // in range: AgentOptions::Validate
  // The kernel takes the mask against the process's cpuset, not the calling
  // thread's mask, and fails only when no CPU of it is usable.
  if (sched_setaffinity(0, sizeof(want), &want) != 0) {
    const int err = errno;
    status_ = Refused(cpus, ": " + ErrnoStatus("sched_setaffinity", err).message());
    return;
  }
  changed_ = true;
  if (!every_cpu) return;
  // It drops the unusable rest silently: the mask it kept names them.
  cpu_set_t got;
  CPU_ZERO(&got);
  if (sched_getaffinity(0, sizeof(got), &got) != 0) {
    status_ = ErrnoStatus("sched_getaffinity", errno);
    return;
  }
  std::vector<int> dropped;
  for (int cpu : cpus)
    if (!CPU_ISSET(cpu, &got)) dropped.push_back(cpu);
  if (!dropped.empty()) status_ = Refused(dropped, " (offline, or outside its cpuset)");
}

ScopedAffinity::~ScopedAffinity() {
  if (changed_) (void)sched_setaffinity(0, sizeof(old_), &old_);
}

}  // namespace kvlane::core
