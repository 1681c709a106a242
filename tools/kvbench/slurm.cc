#include "slurm.h"

#include <cstdlib>

namespace kvbench {
namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// A non-negative decimal number, else -1.
int NonNegative(const std::string& text) {
  if (text.empty() || text.size() > 9) return -1;
  for (char c : text) {
    if (c < '0' || c > '9') return -1;
  }
  return std::atoi(text.c_str());
}

}  // namespace

kvlane::Result<std::string> FirstSlurmHost(const std::string& nodelist) {
  size_t open = nodelist.find('[');
  size_t comma = nodelist.find(',');
  if (open == std::string::npos || (comma != std::string::npos && comma < open)) {
    std::string host = nodelist.substr(0, comma);
    if (host.empty()) return kvlane::Status::InvalidArgument("empty Slurm node list");
    return host;
  }
  size_t close = nodelist.find(']', open);
  if (close == std::string::npos || close == open + 1)
    return kvlane::Status::InvalidArgument("cannot read Slurm node list '" + nodelist + "'");
  std::string range = nodelist.substr(open + 1, close - open - 1);
  std::string first = range.substr(0, range.find_first_of(",-"));
  if (first.empty()) return kvlane::Status::InvalidArgument("cannot read Slurm node list '" + nodelist + "'");
  return nodelist.substr(0, open) + first;  // keeps the zero padding: "07"
}

kvlane::Status ApplySlurm(RunConfig* c) {
  if (c->rank >= 0 || Env("SLURM_PROCID").empty() || Env("SLURM_NTASKS") != "2") return kvlane::Status::Ok();
  c->rank = std::atoi(Env("SLURM_PROCID").c_str());
  if (!c->peer.empty()) return kvlane::Status::Ok();
  std::string list = Env("SLURM_STEP_NODELIST");
  if (list.empty()) list = Env("SLURM_JOB_NODELIST");
  KVLANE_ASSIGN_OR_RETURN(std::string host, FirstSlurmHost(list));
  std::string port = Env("KVBENCH_PORT");
  c->peer = host + ":" + (port.empty() ? std::to_string(kDefaultSlurmPort) : port);
  return kvlane::Status::Ok();
}

int LocalRank() {
  for (const char* name : {"SLURM_LOCALID", "LOCAL_RANK"}) {
    int v = NonNegative(Env(name));
    if (v >= 0) return v;
  }
  return -1;
}

}  // namespace kvbench
