#include "transport/local/local_transport.h"

#include <openssl/crypto.h>

#include <cstring>
#include <thread>

#include "core/random.h"
#include "core/request.h"
#include "core/start_thread.h"
#include "transport/local/local_directory.h"

namespace kvlane::core {
namespace {

// Moves one chunk between this process's memory and the peer's registered memory:
// every segment is checked (registered, inside its piece, writable for a WRITE)
// before any byte moves, as tcp and shm check a frame whole.
Status CopyChunk(const LocalEndpoint& peer, const WorkItem& w) {
  const Request& r = *w.req;
  const ChunkPlan& c = r.chunks[w.chunk];
  auto lock = peer.registry->LockShared();  // Deregister waits for us
  for (uint32_t i = c.seg_begin; i < c.seg_end; ++i) {
    const Segment& s = r.segs[i];
    uint8_t* remote = nullptr;
    KVLANE_RETURN_IF_ERROR(
        peer.registry->LookupLocked(s.remote_key, s.remote_addr, s.len, r.op, &remote));
  }
  for (uint32_t i = c.seg_begin; i < c.seg_end; ++i) {
    const Segment& s = r.segs[i];
    // Checked above, under the same lock; in one process the pointer
    // LookupLocked gives for a peer's address is that address.
    auto* remote = reinterpret_cast<uint8_t*>(s.remote_addr);
    auto* local = reinterpret_cast<uint8_t*>(s.local_addr);
    if (r.op == Op::kWrite) {
      std::memcpy(remote, local, s.len);
    } else {
      std::memcpy(local, remote, s.len);
    }
  }
  return Status::Ok();
}

class LocalChannel final : public Channel {
 public:
  LocalChannel(std::shared_ptr<LocalEndpoint> peer, std::string self_name, const AgentOptions& o,
               Completer* completer)
      : Channel(o.lanes_per_peer, o.lane_ring_slots, completer),
        peer_(std::move(peer)),
        self_name_(std::move(self_name)),
        spin_(o.spin) {}
  ~LocalChannel() override { Close(); }

  // One worker per lane; a lane whose worker could not start is only closed
  // (nothing was posted yet).
  Status StartWorkers() {
    threads_.reserve(lane_count());  // push_back below never reallocates (throws)
    for (int i = 0; i < lane_count(); ++i) {
      std::thread t;
      KVLANE_RETURN_IF_ERROR(StartThread(&t, "local lane", [this, i] { Run(i); }));
      threads_.push_back(std::move(t));
    }
    return Status::Ok();
  }

  const char* transport() const override { return "local"; }

  // A peer agent that shut down latches kRemoteDisconnect here as a broken
  // connection does on tcp and shm: its queue is nobody's any more.
  // Checked and pushed under the peer registry's shared lock, which its
  // agent's close takes exclusively: a notification is queued before the
  // close, or refused.
  Status Notify(std::string_view bytes) override {
    KVLANE_RETURN_IF_ERROR(latch().Get());
    {
      auto lock = peer_->registry->LockShared();
      if (!peer_->registry->ClosedLocked())
        return peer_->notifs->Push({self_name_, std::string(bytes)});
    }
    return LatchGone();
  }

  void Close() override {
    if (closing().load()) return;
    BeginClose();
    for (auto& t : threads_) t.join();
  }

 private:
  void Run(int lane) {
    LaneQueue& q = queue(lane);
    while (!closing().load(std::memory_order_acquire)) {
      WorkItem* w = q.PeekIssue();
      if (w == nullptr) {
        q.WaitForIssue(spin_);
        continue;
      }
      q.AdvanceIssue();
      Status s = latch().Get();
      if (s.ok())
        s = BeginChunk(*w) ? CopyChunk(*peer_, *w) : Status::Canceled("canceled before start");
      if (s.code() == Code::kRemoteDisconnect) s = LatchGone();  // the peer's registry closed
      RetireHead(lane, s);
    }
    DrainLane(lane, Status::Canceled("channel closed"));
  }

  // Latches (once) and returns the peer's end: later posts and notifications
  // are refused at once, and PeerError says why.
  Status LatchGone() {
    latch().Latch(Status::RemoteDisconnect("local peer '" + peer_->name + "' shut down"));
    return latch().Get();
  }

  std::shared_ptr<LocalEndpoint> peer_;
  std::string self_name_;
  std::chrono::microseconds spin_;
  std::vector<std::thread> threads_;
};

class LocalTransport final : public Transport {
 public:
  explicit LocalTransport(AgentContext* ctx) : ctx_(ctx) {}
  const char* name() const override { return "local"; }

  Status Start() override {
    PublishLocal(ctx_->agent_id,
                 std::make_shared<LocalEndpoint>(
                     LocalEndpoint{ctx_->name, ctx_->registry, ctx_->notifs, true, ctx_->secret}));
    return Status::Ok();
  }
  // The secret is checked at Connect: a blob that does not hold it is
  // refused there, said as such, rather than passed over.
  bool CanReach(const AgentMeta& peer) const override {
    if (peer.process_token != ProcessToken()) return false;
    auto ep = FindLocal(peer.agent_id);
    return ep != nullptr && ep->serves_local;
  }
  Result<std::unique_ptr<Channel>> Connect(const AgentMeta& peer) override {
    auto ep = FindLocal(peer.agent_id);
    if (ep == nullptr || !ep->serves_local)
      return Status::RemoteDisconnect("local peer '" + peer.name + "' is gone");
    // What tcp and shm make an initiator prove in its Hello: it holds the
    // blob, not just the id (constant time, as there).
    if (CRYPTO_memcmp(ep->secret.data(), peer.secret.data(), peer.secret.size()) != 0)
      return Status::NotAllowed("local peer '" + peer.name +
                                "': the agent of this process with its id holds another secret " +
                                "(forged or damaged metadata)");
    auto ch =
        std::make_unique<LocalChannel>(std::move(ep), ctx_->name, ctx_->options, ctx_->completer);
    KVLANE_RETURN_IF_ERROR(ch->StartWorkers());
    return std::unique_ptr<Channel>(std::move(ch));
  }
  void Stop() override { UnpublishLocal(ctx_->agent_id); }

 private:
  AgentContext* ctx_;
};

}  // namespace

std::unique_ptr<Transport> MakeLocalTransport(AgentContext* ctx) {
  return std::make_unique<LocalTransport>(ctx);
}

}  // namespace kvlane::core
