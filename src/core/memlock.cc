// Pre-flight for pinning: RLIMIT_MEMLOCK raised soft-to-hard when needed.
#include <sys/resource.h>

#include <string>

#include "core/sys.h"
#include "kvlane/agent.h"

namespace kvlane {

Status EnsureMemlock(uint64_t bytes) {
  rlimit lim{};
  if (getrlimit(RLIMIT_MEMLOCK, &lim) != 0) return core::ErrnoStatus("getrlimit(RLIMIT_MEMLOCK)", errno);
  if (lim.rlim_cur == RLIM_INFINITY || lim.rlim_cur >= bytes) return Status::Ok();
  auto num = [](rlim_t v) { return v == RLIM_INFINITY ? std::string("unlimited") : std::to_string(v); };
  if (lim.rlim_max != RLIM_INFINITY && lim.rlim_max < bytes)
    return Status::NotAllowed("RLIMIT_MEMLOCK too low to pin memory: need " + std::to_string(bytes) +
                              " bytes, soft limit " + num(lim.rlim_cur) + ", hard limit " +
                              num(lim.rlim_max) + " (raise it with ulimit -l or limits.conf)");
  rlim_t old = lim.rlim_cur;
  lim.rlim_cur = lim.rlim_max;
  if (setrlimit(RLIMIT_MEMLOCK, &lim) != 0)
    return Status::NotAllowed("cannot raise RLIMIT_MEMLOCK soft limit " + num(old) + " to hard " +
                              num(lim.rlim_max) + " for " + std::to_string(bytes) + " bytes");
  return Status::Ok();
}

}  // namespace kvlane
