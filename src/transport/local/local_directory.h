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
  // The agent enabled the local transport (a local peer may reach it through
  // it). The cuda transport publishes an agent too, without it: a cuda channel
  // to an agent of this process reaches its memory through peer access and
  // checks the pieces in its registry.
  bool serves_local = false;
};

// Publishes `ep` for `agent_id`; an agent published twice (by its local and
// its cuda transport) keeps one entry that serves local if either does.
void PublishLocal(uint64_t agent_id, std::shared_ptr<LocalEndpoint> ep);
// Removes the agent's entry (either transport's Stop: both end with the agent).
void UnpublishLocal(uint64_t agent_id);
std::shared_ptr<LocalEndpoint> FindLocal(uint64_t agent_id);

}  // namespace kvlane::core
