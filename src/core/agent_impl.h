// AgentImpl: the engine behind kvlane::Agent. See include/kvlane/agent.h for the
// contracts; this header only adds the internal state.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/completer.h"
#include "core/peer.h"
#include "core/record_table.h"
#include "core/request.h"
#include "kvlane/agent.h"
#include "transport/transport.h"

namespace kvlane::core {

class MetadataServer;

class AgentImpl {
 public:
  static Result<std::unique_ptr<AgentImpl>> Create(const AgentOptions& options);
  ~AgentImpl();  // Close() unless called
  // Agent::Close: stops everything the destructor stops, once; kBackend when a
  // request is left poisoned (its memory may still be copied: keep it).
  Status Close();

  const AgentContext& context() const { return ctx_; }

  Result<RegionId> RegisterMemory(void* addr, uint64_t len, MemoryKind kind, int32_t device,
                                  Access access);
  Status DeregisterMemory(RegionId region);
  AgentMeta SelfMeta() const;
  Result<std::string> LoadPeer(std::string_view blob);
  Status RemovePeer(std::string_view peer);
  Result<std::string> PeerTransport(std::string_view peer, MemoryKind kind = MemoryKind::kHost);
  Status PeerError(std::string_view peer) const;
  // The channel to `peer`, connected if needed (tests inject faults through its latch).
  Result<Channel*> PeerChannel(std::string_view peer, MemoryKind kind = MemoryKind::kHost);
  // Port of the metadata listener; 0 when AgentOptions.metadata_listen is empty.
  uint16_t metadata_port() const;

  Result<PreparedId> PrepareLocal(const DescList& list);
  Result<PreparedId> PrepareRemote(std::string_view peer, const DescList& list);
  Status ReleasePrepared(PreparedId id);
  Result<XferHandle> MakeTransfer(Op op, PreparedId local, std::span<const uint32_t> local_idx,
                                  PreparedId remote, std::span<const uint32_t> remote_idx,
                                  std::string_view notif, XferOptions xo);
  Status Post(XferHandle* handle);
  bool PostMayWait(const XferHandle& handle) const;
  Status Check(const XferHandle& handle) const;
  Result<XferInfo> Describe(const XferHandle& handle) const;
  Status Wait(const XferHandle& handle, std::chrono::nanoseconds timeout) const;
  Status Cancel(const XferHandle& handle);
  Status Release(XferHandle* handle);
  Status SendNotification(std::string_view peer, std::string_view bytes);
  std::vector<Notification> TakeNotifications() { return ctx_.notifs->TakeAll(); }
  // Chunks of the handle's current post that a lane has started (it then owns
  // the request: Cancel refuses). For tests that must wait for that moment.
  Result<uint32_t> ChunksStarted(const XferHandle& handle) const;
  // The slot a handle names, nullptr past the table. For tests that hold its
  // claim as another thread's Post would.
  Request* SlotForTest(const XferHandle& handle) const {
    return handle.slot < slots_.size() ? slots_[handle.slot].get() : nullptr;
  }

 private:
  explicit AgentImpl(const AgentOptions& options);
  Status Init();
  std::shared_ptr<PeerState> FindPeer(std::string_view name) const;
  // The channel for moving `local` to/from `remote` memory: the first enabled
  // transport (in options order) that moves those kinds and reaches the peer.
  Result<Channel*> EnsureChannel(PeerState& peer, MemoryKind local, MemoryKind remote);
  Result<std::shared_ptr<PreparedList>> GetPrepared(PreparedId id) const;
  // Every peer this agent still refers to: those loaded, and those removed or
  // replaced that a prepared list or a request still holds. For Close.
  std::vector<std::shared_ptr<PeerState>> EveryPeer();
  // Files `p` under a fresh id (next_prepared_).
  PreparedId AddPrepared(std::shared_ptr<PreparedList> p);
  Result<Request*> SlotOf(const XferHandle& h) const;
  static Status CheckPairs(Op op, const PreparedList& local, std::span<const uint32_t> li,
                           const PreparedList& remote, std::span<const uint32_t> ri);
  void BuildSegments(Request* r, const PreparedList& local, std::span<const uint32_t> li,
                     const PreparedList& remote, std::span<const uint32_t> ri, uint64_t max_seg);
  uint64_t ChunkSizeFor(const Request& r) const;
  // Fills r->local_keys and r->local_removals; InvalidArgument when a local
  // piece is no longer registered (CheckLocalKeys).
  Status CollectLocalKeys(Request* r) const;
  Status CheckLocalKeys(const Request& r) const;
  // Takes Request::posting for this thread: false when another thread holds it
  // (a copy of the handle posted or released at the same moment).
  static bool ClaimSlot(Request& r);
  // Returns the slot to the free list, unless the request is poisoned: a target or
  // a wedged GPU may still touch its state, so the slot is never reused. Lets
  // the slot's claim go.
  void FreeSlot(Request* r);
  // MakeTransfer's refusal when no slot is free, counting the poisoned ones.
  Status AllSlotsTaken() const;
  static Status AwaitSettled(const Request& r, uint32_t gen, std::chrono::steady_clock::time_point deadline);
  bool Striped(const Request& r) const;
  int PickLane(const Request& r, uint32_t chunk, uint32_t rotation) const;

  AgentContext ctx_;
  Completer completer_;
  RecordTable records_;  // Request::record of every slot; outlives the transports
  std::vector<std::unique_ptr<Transport>> transports_;
  std::unique_ptr<MetadataServer> metadata_server_;

  mutable std::shared_mutex peers_mu_;
  std::map<std::string, std::shared_ptr<PeerState>, std::less<>> peers_;  // GUARDED_BY(peers_mu_)

  mutable std::mutex prepared_mu_;
  std::unordered_map<uint32_t, std::shared_ptr<PreparedList>> prepared_;  // GUARDED_BY(prepared_mu_)
  // Each agent's ids start at a random value, so that another agent's id (or a
  // released one of this agent's) rarely names a list here; never 0, never one alive.
  uint32_t next_prepared_;  // GUARDED_BY(prepared_mu_)

  std::vector<std::unique_ptr<Request>> slots_;  // fixed size: options.max_requests
  bool closed_ = false;  // Close() ran (the caller's thread: nothing else runs then)
  Status close_status_;  // its answer, given again by later calls
  std::mutex free_mu_;
  std::vector<uint32_t> free_slots_;  // GUARDED_BY(free_mu_)
  std::atomic<uint32_t> rotation_{0};
};

}  // namespace kvlane::core
