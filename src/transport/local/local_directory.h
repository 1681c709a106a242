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
  // The agent's secret (with serves_local): a local peer must hold the blob
  // that carries it, as a tcp or shm peer must prove it does.
  Secret secret{};
};

// Publishes `ep` for `agent_id`; an agent published twice (by its local and
// its cuda transport) keeps the local transport's entry.
void PublishLocal(uint64_t agent_id, std::shared_ptr<LocalEndpoint> ep);
// Removes the agent's entry (either transport's Stop: both end with the agent).
void UnpublishLocal(uint64_t agent_id);
std::shared_ptr<LocalEndpoint> FindLocal(uint64_t agent_id);

}  // namespace kvlane::core
