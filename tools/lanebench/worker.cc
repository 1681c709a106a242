#include "worker.h"

#include <algorithm>

namespace lanebench {

std::string TargetName(int index) { return "target" + std::to_string(index); }
std::string TargetMetaPath(const std::string& dir, int index) {
  return dir + "/" + TargetName(index) + ".meta";
}
std::string TargetAddrPath(const std::string& dir, int index) {
  return dir + "/" + TargetName(index) + ".addr";
}
std::string TargetPidPath(const std::string& dir, int index) {
  return dir + "/" + TargetName(index) + ".pid";
}
std::string SourceMetaPath(const std::string& dir) { return dir + "/source.meta"; }

std::chrono::milliseconds SpecTimeout(const RunSpec& spec) {
  return std::chrono::milliseconds(static_cast<int64_t>(spec.timeout_s * 1000));
}

std::chrono::steady_clock::time_point RunDeadline(const RunSpec& spec) {
  return std::chrono::steady_clock::now() + SpecTimeout(spec) + kWorkerGrace;
}

std::chrono::milliseconds SourceMargin(const RunSpec& spec) {
  return std::min(SpecTimeout(spec) / 4, std::chrono::milliseconds(1000));
}

std::chrono::steady_clock::time_point SourceDeadline(const RunSpec& spec) {
  return std::chrono::steady_clock::now() + SpecTimeout(spec) - SourceMargin(spec);
}

kvlane::Result<std::unique_ptr<kvlane::Agent>> MakeAgent(const RunSpec& spec,
                                                         const std::string& name) {
  kvlane::AgentOptions o;
  o.name = name;
  KVLANE_ASSIGN_OR_RETURN(o.policy, kvlane::ParsePolicy(spec.policy));
  o.transports = {spec.transport};
  o.lanes_per_peer = spec.lanes_per_peer;
  o.worker_cpus = spec.worker_cpus;
  if (spec.post_inline_bytes >= 0)
    o.post_inline_bytes = static_cast<uint64_t>(spec.post_inline_bytes);
  if (spec.proxy_renew_us >= 0)
    o.cuda_proxy_renew_every = std::chrono::microseconds(spec.proxy_renew_us);
  if (spec.spin_us >= 0) {
    o.spin = std::chrono::microseconds(spec.spin_us);
    o.cuda_proxy_idle_exit = std::max(o.cuda_proxy_idle_exit, o.spin);
  }
  return kvlane::Agent::Create(o);
}

kvlane::Status EnterWorkerCpus(const RunSpec& spec) {
  return spec.worker_cpus.empty() ? kvlane::Status::Ok() : RunOn(spec.worker_cpus);
}

}  // namespace lanebench
