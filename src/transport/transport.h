// Transport: one way of reaching peers (local, shm, tcp, cuda), behind split
// phases: Start (listeners), Export (endpoint into our metadata), CanReach,
// Connect (a Channel with lanes), Stop. Progress runs on the transport's own
// threads, never inside Check().
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/channel.h"
#include "core/completer.h"
#include "core/metadata.h"
#include "core/record_table.h"
#include "core/registry.h"
#include "kvlane/options.h"
#include "kvlane/transfer.h"
#include "transport/notif_queue.h"
#include "transport/peer_conn_limit.h"

namespace kvlane::core {

// What every transport of an agent shares. Outlives the transports.
struct AgentContext {
  AgentOptions options;
  std::string name;
  uint64_t agent_id = 0;
  Secret secret{};
  std::shared_ptr<Registry> registry;
  std::shared_ptr<NotifQueue> notifs;
  // Connections per peer name, counted over all of the agent's servers (tcp, shm,
  // the cuda control socket) together. Each server holds it until its threads end.
  std::shared_ptr<PeerConnLimit> peer_conns;
  Completer* completer = nullptr;
  RecordTable* records = nullptr;  // the slots' terminal records (a device may map them)
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual const char* name() const = 0;
  // Starts listeners. Called once before Export.
  virtual Status Start() { return Status::Ok(); }
  // After Start: why this transport can reach no peer from this host (the cuda
  // transport where no CUDA device is visible), or empty when it can. An agent
  // whose every transport gives a reason is refused at creation.
  virtual std::string Inert() const { return {}; }
  // Adds this transport's endpoint to our metadata.
  virtual void Export(AgentMeta* self) const { (void)self; }
  virtual bool CanReach(const AgentMeta& peer) const = 0;
  // Whether this transport moves bytes between these kinds of memory.
  virtual bool CanMove(MemoryKind local, MemoryKind remote) const {
    return local == MemoryKind::kHost && remote == MemoryKind::kHost;
  }
  // Whether it moves them only through host staging buffers (tcp with device
  // memory): a transport that moves them directly is preferred.
  virtual bool Stages(MemoryKind local, MemoryKind remote) const { return false; }
  virtual Result<std::unique_ptr<Channel>> Connect(const AgentMeta& peer) = 0;
  // Stops listeners and server threads. Called once, before destruction.
  virtual void Stop() {}
};

}  // namespace kvlane::core
