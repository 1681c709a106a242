// The process-wide directory of agents, so that a local peer can be found by id.
// Thread-safety: thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/registry.h"
#include "transport/transport.h"

namespace kvlane::core {

// What a local peer may touch of another agent. Kept alive by shared_ptr so
// that an agent destroyed mid-transfer leaves a closed registry, not a dangling one.
struct LocalEndpoint {
  std::string name;
  std::shared_ptr<Registry> registry;
  std::shared_ptr<NotifQueue> notifs;
};

void PublishLocal(uint64_t agent_id, std::shared_ptr<LocalEndpoint> ep);
void UnpublishLocal(uint64_t agent_id);
std::shared_ptr<LocalEndpoint> FindLocal(uint64_t agent_id);

}  // namespace kvlane::core
