#include "pinning.h"

#include <sched.h>

namespace lanebench {

CpuSplit SplitCpus() {
  cpu_set_t s;
  CPU_ZERO(&s);
  CpuSplit out;
  if (sched_getaffinity(0, sizeof(s), &s) != 0) return out;
  std::vector<int> all;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &s)) all.push_back(c);
  if (all.size() < 2) return out;
  // The last CPU: the first ones tend to take more device interrupts.
  out.poller = all.back();
  out.workers.assign(all.begin(), all.end() - 1);
  return out;
}

bool PinResolved(const std::string& pin) {
  if (pin == "on") return true;
  if (pin == "off") return false;
  return SplitCpus().workers.size() >= 3;
}

kvlane::Status RunOn(const std::vector<int>& cpus) {
  cpu_set_t s;
  CPU_ZERO(&s);
  for (int c : cpus) CPU_SET(c, &s);
  if (cpus.empty() || sched_setaffinity(0, sizeof(s), &s) != 0)
    return kvlane::Status::Backend("cannot run on CPUs " + CpuListName(cpus));
  return kvlane::Status::Ok();
}

std::string CpuListName(const std::vector<int>& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += std::to_string(cpus[i]);
    if (j > i) out += "-" + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out;
}

}  // namespace lanebench
