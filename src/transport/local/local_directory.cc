#include "transport/local/local_directory.h"

#include <pthread.h>

#include <atomic>
#include <mutex>
#include <unordered_map>

namespace kvlane::core {
namespace {

struct Directory {
  std::mutex mu;
  std::unordered_map<uint64_t, std::shared_ptr<LocalEndpoint>> map;  // GUARDED_BY(mu)
};

// Never destroyed: agents may outlive statics.
std::atomic<Directory*> g_dir{nullptr};

// A forked child starts with an empty directory: the parent's entries are
// copies of agents whose threads are gone (leaked, not destroyed: their
// destructors would run the parent's teardown), and another thread of the
// parent may have held the lock at the fork.
void FreshDirectoryInChild() { g_dir.store(new Directory(), std::memory_order_relaxed); }

// At load, not at first use (as ProcessToken's).
const bool kFreshAtFork = pthread_atfork(nullptr, nullptr, &FreshDirectoryInChild) == 0;

Directory& Dir() {
  (void)kFreshAtFork;
  Directory* d = g_dir.load(std::memory_order_acquire);
  if (d != nullptr) return *d;
  auto* made = new Directory();
  if (g_dir.compare_exchange_strong(d, made, std::memory_order_acq_rel)) return *made;
  delete made;  // another thread's came first
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
