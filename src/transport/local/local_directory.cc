#include "transport/local/local_directory.h"

#include <mutex>
#include <unordered_map>

namespace kvlane::core {
namespace {

struct Directory {
  std::mutex mu;
  std::unordered_map<uint64_t, std::shared_ptr<LocalEndpoint>> map;  // GUARDED_BY(mu)
};

Directory& Dir() {
  static Directory* d = new Directory();  // never destroyed: agents may outlive statics
  return *d;
}

}  // namespace

void PublishLocal(uint64_t agent_id, std::shared_ptr<LocalEndpoint> ep) {
  std::lock_guard lock(Dir().mu);
  auto& slot = Dir().map[agent_id];
  if (slot != nullptr && slot->serves_local && !ep->serves_local) return;  // the same agent's
  slot = std::move(ep);
}

void UnpublishLocal(uint64_t agent_id) {
  std::lock_guard lock(Dir().mu);
  Dir().map.erase(agent_id);
}

std::shared_ptr<LocalEndpoint> FindLocal(uint64_t agent_id) {
  std::lock_guard lock(Dir().mu);
  auto it = Dir().map.find(agent_id);
  return it == Dir().map.end() ? nullptr : it->second;
}

}  // namespace kvlane::core
