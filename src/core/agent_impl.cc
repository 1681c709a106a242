#include "core/agent_impl.h"

#include <unistd.h>

#include <algorithm>
#include <optional>
#include <set>
#include <thread>
#include <utility>

#include "control/metadata_server.h"
#include "core/affinity.h"
#include "core/device_copier.h"
#include "core/host_info.h"
#include "core/host_mapping.h"
#include "core/random.h"
#include "transport/local/local_transport.h"
#include "transport/notif_queue.h"
#include "transport/stream/stream_transport.h"
#include "transport/stream/wire.h"
#ifdef KVLANE_HAVE_CUDA
#include "transport/cuda/cuda_transport.h"
#endif

namespace kvlane::core {
namespace {

// Why memory must stay after a post was left poisoned (DeregisterMemory, Close).
constexpr const char* kMayStillCopy =
    "a GPU that stopped answering (wedged), or an shm target that did not let go of a failed "
    "transfer, may still copy into or out of ";

std::unique_ptr<Transport> MakeTransport(const std::string& name, AgentContext* ctx) {
  if (name == "local") return MakeLocalTransport(ctx);
  if (name == "shm") return MakeShmTransport(ctx);
  if (name == "tcp") return MakeTcpTransport(ctx);
#ifdef KVLANE_HAVE_CUDA
  if (name == "cuda") return MakeCudaTransport(ctx);
#endif
  return nullptr;  // not built in: skipped
}

// What a failed connect reports, from `agreed`: the code every transport that
// tried gave, when they agree. The peer answered and refused (kNotAllowed: a
// policy such as its connection cap, or its hello or proof failed) or speaks
// another wire version (kNotSupported): said as such, since reconnecting with
// the same metadata cannot help. Anything else (nothing listens, a reset, a
// timeout, transports failing differently) reads as kRemoteDisconnect.
Code ConnectFailureCode(std::optional<Code> agreed) {
  if (agreed == Code::kNotAllowed || agreed == Code::kNotSupported) return *agreed;
  return Code::kRemoteDisconnect;
}

}  // namespace

AgentImpl::AgentImpl(const AgentOptions& options)
    : completer_(options.policy, options.max_requests),
      records_(options.max_requests, static_cast<uint32_t>(RandomU64())) {
  ctx_.options = options;
  ctx_.name = options.name;
  ctx_.agent_id = RandomU64();
  next_prepared_ = static_cast<uint32_t>(RandomU64());
  RandomBytes(ctx_.secret.data(), ctx_.secret.size());
  ctx_.registry = std::make_shared<Registry>(options.piece_bytes);
  const uint64_t per_peer = options.max_notification_bytes_per_peer;
  ctx_.notifs = std::make_shared<NotifQueue>(
      options.max_notification_bytes,
      per_peer != 0 ? per_peer : NotifQueue::DefaultShare(options.max_notification_bytes));
  ctx_.peer_conns = std::make_shared<PeerConnLimit>(options.max_conns_per_peer);
  ctx_.completer = &completer_;
  ctx_.records = &records_;
  slots_.resize(options.max_requests);
  free_slots_.reserve(options.max_requests);
  for (uint32_t i = options.max_requests; i-- > 0;) {
    slots_[i] = std::make_unique<Request>(records_.at(i));
    slots_[i]->slot = i;
    free_slots_.push_back(i);
  }
}

Result<std::unique_ptr<AgentImpl>> AgentImpl::Create(const AgentOptions& options) {
  KVLANE_RETURN_IF_ERROR(options.Validate());
  std::unique_ptr<AgentImpl> impl(new AgentImpl(options));
  KVLANE_RETURN_IF_ERROR(impl->Init());
  return impl;
}

Status AgentImpl::Init() {
  // Listener and accept threads inherit it; a CPU the kernel refuses fails Create here.
  ScopedAffinity on_workers(ctx_.options.worker_cpus);
  KVLANE_RETURN_IF_ERROR(on_workers.status());
  for (const std::string& name : ctx_.options.transports) {
    std::unique_ptr<Transport> t = MakeTransport(name, &ctx_);
    if (t == nullptr) continue;
    KVLANE_RETURN_IF_ERROR(t->Start());
    transports_.push_back(std::move(t));
  }
  if (transports_.empty()) {
    std::string names;
    for (const std::string& name : ctx_.options.transports)
      names += (names.empty() ? "" : ", ") + name;
    return Status::NotSupported("no transport of AgentOptions.transports (" + names +
                                ") is built into this library");
  }
  std::string inert;  // an agent no peer could reach, nor it any peer: refused now
  for (const auto& t : transports_) {
    const std::string why = t->Inert();
    if (why.empty()) {
      inert.clear();
      break;
    }
    inert += (inert.empty() ? "" : "; ") + std::string(t->name()) + ": " + why;
  }
  if (!inert.empty())
    return Status::NotSupported("no transport of AgentOptions.transports works on this host (" +
                                inert + "); add local, shm or tcp");
  if (!ctx_.options.metadata_listen.empty()) {
    KVLANE_ASSIGN_OR_RETURN(metadata_server_, MetadataServer::Start(
                                                  ctx_.options.metadata_listen,
                                                  [this] { return EncodeMeta(SelfMeta()); },
                                                  [this] { return ctx_.registry->changes(); }));
  }
  return Status::Ok();
}

AgentImpl::~AgentImpl() { (void)Close(); }

Status AgentImpl::Close() {
  if (closed_) return close_status_;
  closed_ = true;
  metadata_server_.reset();
  ctx_.registry->Close();  // peers' accesses from now on fail cleanly
  for (auto& t : transports_) t->Stop();
  // Every channel stops (a cuda channel's resident kernels exit, an shm lane starts
  // its wait for the target) before any closes: a free that synchronizes the device
  // would wait for another channel's kernel, whose lane thread may be the one to
  // stop it, and the shm waits run together. Peers removed or replaced (RemovePeer,
  // LoadPeer of a restarted peer) count too: their requests and lists still hold them.
  {
    // Dropped before the transports go (below), as the last holders of these
    // peers drop them: a channel's destructor may still reach its transport.
    const std::vector<std::shared_ptr<PeerState>> peers = EveryPeer();
    for (const auto& peer : peers) {
      std::lock_guard plock(peer->mu);
      peer->StopAll();
    }
    for (const auto& peer : peers) {
      std::lock_guard plock(peer->mu);
      peer->CloseAll();
    }
  }
  // Every lane has ended: a request is poisoned for good now, or never.
  bool held = false;
  for (auto& r : slots_) held = held || r->poisoned.load(std::memory_order_acquire);
  // Such a post's record may still be written by its GPU: the table stays
  // (mapped, never freed), before the transports that mapped it go.
  if (held) records_.Abandon();
  for (auto& r : slots_) r->peer.reset();
  prepared_.clear();
  peers_.clear();
  transports_.clear();
  if (held)
    close_status_ = Status::Backend(std::string("Close: ") + kMayStillCopy +
                                    "this agent's registered memory: do not free or reuse any of "
                                    "it");
  return close_status_;
}

std::vector<std::shared_ptr<PeerState>> AgentImpl::EveryPeer() {
  std::set<std::shared_ptr<PeerState>> all;
  {
    std::shared_lock lock(peers_mu_);
    for (const auto& [name, peer] : peers_) all.insert(peer);
  }
  {
    std::lock_guard lock(prepared_mu_);
    for (const auto& [id, list] : prepared_) {
      if (list->peer) all.insert(list->peer);
    }
  }
  for (const auto& r : slots_) {
    if (r->peer) all.insert(r->peer);
  }
  return {all.begin(), all.end()};
}

Result<RegionId> AgentImpl::RegisterMemory(void* addr, uint64_t len, MemoryKind kind,
                                           int32_t device, Access access) {
  auto enabled = [&](const char* t) {
    return std::find(ctx_.options.transports.begin(), ctx_.options.transports.end(), t) !=
           ctx_.options.transports.end();
  };
  if (kind != MemoryKind::kHost && kind != MemoryKind::kCuda)
    return Status::InvalidArgument("unknown memory kind " + std::to_string(static_cast<int>(kind)));
  if (kind == MemoryKind::kCuda && !enabled("cuda") &&
      !(enabled("tcp") && ProcessDeviceStaging() != nullptr))
    return Status::NotSupported(
        "CUDA memory needs the cuda transport in AgentOptions.transports, or tcp in a build "
        "with CUDA on a machine with a GPU (tcp stages it through pinned host memory)");
  const auto a = reinterpret_cast<uint64_t>(addr);
  if (kind == MemoryKind::kHost && addr != nullptr && len > 0 && a + len > a)
    KVLANE_RETURN_IF_ERROR(CheckHostMapped(a, len, /*writable=*/true));  // this agent's READs land
  return ctx_.registry->Add(a, len, kind, device, access);
}

Status AgentImpl::DeregisterMemory(RegionId region) {
  KVLANE_ASSIGN_OR_RETURN(std::vector<uint64_t> keys, ctx_.registry->Remove(region));
  std::sort(keys.begin(), keys.end());
  // Posts from now on refuse the region (Post reads the removal count after it
  // marks itself posting); those posting or in flight on it are waited for
  // here, so that the caller may free the memory once this returns. A post a
  // wedged GPU gave up on (poisoned) may still move data: then kBackend, and
  // the memory must stay.
  bool wedged = false;
  for (const auto& r : slots_) wedged = r->AwaitOffRegions(keys) || wedged;
  if (wedged)
    return Status::Backend(std::string("DeregisterMemory: ") + kMayStillCopy +
                           "the region; it is gone for new posts, but do not free or reuse its "
                           "memory");
  return Status::Ok();
}

AgentMeta AgentImpl::SelfMeta() const {
  AgentMeta m;
  m.name = ctx_.name;
  m.agent_id = ctx_.agent_id;
  m.secret = ctx_.secret;
  m.process_token = ProcessToken();
  m.pid = static_cast<uint32_t>(getpid());
  m.hostname = HostName();
  m.boot_id = BootId();
  for (const auto& t : transports_) t->Export(&m);
  m.pieces = ctx_.registry->Pieces();
  return m;
}

std::shared_ptr<PeerState> AgentImpl::FindPeer(std::string_view name) const {
  std::shared_lock lock(peers_mu_);
  auto it = peers_.find(name);
  return it == peers_.end() ? nullptr : it->second;
}

Result<std::string> AgentImpl::LoadPeer(std::string_view blob) {
  KVLANE_ASSIGN_OR_RETURN(AgentMeta meta, DecodeMeta(blob));
  std::string name = meta.name;
  std::shared_ptr<PeerState> known;
  // A restarted peer's old state: when nothing else holds it, it is destroyed
  // (its channels closed, lane threads joined) after peers_mu_ is let go, which
  // every other peer's calls take.
  std::shared_ptr<PeerState> replaced;
  {
    std::unique_lock lock(peers_mu_);
    auto it = peers_.find(name);
    if (it == peers_.end() || it->second->meta.agent_id != meta.agent_id) {
      auto fresh = std::make_shared<PeerState>(std::move(meta));
      if (it == peers_.end()) {
        peers_.emplace(name, std::move(fresh));  // new peer
      } else {
        replaced = std::exchange(it->second, std::move(fresh));  // restarted peer
      }
      return name;
    }
    known = it->second;
  }
  // A refresh, under the peer's refresh_mu, not under peers_mu_: a connect to
  // it in progress holds refresh_mu (EnsureChannel) for up to its
  // connect_timeout per connection, and every other peer's calls take peers_mu_.
  std::lock_guard refresh(known->refresh_mu);
  std::vector<Channel*> channels;
  std::vector<Piece> current;
  {
    std::lock_guard plock(known->mu);
    for (auto& [transport, ch] : known->channels) channels.push_back(ch.get());
    current = known->meta.pieces;
  }
  // Without the peer's lock: a cuda channel asks its peer about keys it has
  // not checked, and its lane threads take that lock meanwhile.
  for (Channel* ch : channels) KVLANE_RETURN_IF_ERROR(ch->PeerTableChanged(meta.pieces, current));
  std::lock_guard plock(known->mu);
  known->meta.pieces = std::move(meta.pieces);        // the region table
  known->meta.cuda_blob = std::move(meta.cuda_blob);  // and the IPC handles of new pieces
  return name;
}

Status AgentImpl::RemovePeer(std::string_view peer) {
  std::shared_ptr<PeerState> gone;  // destroyed after the lock, as in LoadPeer
  std::unique_lock lock(peers_mu_);
  auto it = peers_.find(peer);
  if (it == peers_.end()) return Status::NotFound("unknown peer '" + std::string(peer) + "'");
  gone = std::move(it->second);
  peers_.erase(it);  // closes when the last transfer referring to it is released
  lock.unlock();
  return Status::Ok();
}

namespace {

// What a peer's metadata offers to connect through, as transport names: for
// an error that says why no transport of this agent reaches it. (Whether it
// serves local, its metadata does not say: an agent of this process is found
// in the process's directory.)
std::string PeerOffers(const AgentMeta& peer) {
  std::string offers;
  const auto add = [&](const std::string& what) { offers += (offers.empty() ? "" : ", ") + what; };
  const bool same_host = peer.boot_id == BootId();
  if (!peer.shm_socket.empty()) add(same_host ? "shm" : "shm (on another host)");
  if (!peer.tcp_host.empty()) add("tcp");
  if (!peer.cuda_blob.empty()) add(same_host ? "cuda" : "cuda (on another host)");
  return offers.empty() ? "none" : offers;
}

}  // namespace

Result<Channel*> AgentImpl::EnsureChannel(PeerState& peer, MemoryKind local, MemoryKind remote) {
  // The common case, a channel already open: found under the peer's lock
  // alone, so that a refresh asking the peer (LoadPeer, under refresh_mu) does
  // not hold it up. The same walk as below, up to the first transport that
  // would connect.
  const auto already_open = [&]() -> Channel* {
    std::lock_guard lock(peer.mu);
    for (bool staged : {false, true}) {
      for (auto& t : transports_) {
        if (!t->CanMove(local, remote) || t->Stages(local, remote) != staged) continue;
        auto it = peer.channels.find(t->name());
        if (it != peer.channels.end()) return it->second.get();
        if (t->CanReach(peer.meta)) return nullptr;
      }
    }
    return nullptr;
  };
  if (Channel* open = already_open()) return open;
  // One opening (or refresh) of this peer at a time. `meta` changes only
  // under refresh_mu and mu both, so it is read here under refresh_mu alone;
  // the dials (up to connect_timeout each) run without mu, which calls naming
  // this peer and the lane threads of its open channels take.
  std::lock_guard refresh(peer.refresh_mu);  // a channel opens with the table it checks
  const auto open_channel = [&](std::string_view transport) -> Channel* {
    std::lock_guard lock(peer.mu);
    auto it = peer.channels.find(transport);
    return it == peer.channels.end() ? nullptr : it->second.get();
  };
  std::string tried, unreached;
  std::optional<Code> agreed;  // the code every failed connect gave, if they agree
  bool disagree = false;
  // Transports that move these kinds directly first, then those that stage them.
  for (bool staged : {false, true}) {
    for (auto& t : transports_) {
      if (!t->CanMove(local, remote) || t->Stages(local, remote) != staged) continue;
      if (Channel* open = open_channel(t->name())) return open;
      if (!t->CanReach(peer.meta)) {
        const std::string inert = t->Inert();
        unreached += (unreached.empty() ? "" : ", ") + std::string(t->name()) +
                     (inert.empty() ? "" : " (" + inert + ")");
        continue;
      }
      // The channel's lane threads inherit it; a worker CPU gone since Create leaves
      // the others (Create refused a list with one the process could not use).
      ScopedAffinity on_workers(ctx_.options.worker_cpus, /*every_cpu=*/false);
      if (!on_workers.status().ok()) return on_workers.status();
      auto ch = t->Connect(peer.meta);
      if (ch.ok()) {
        std::lock_guard lock(peer.mu);
        return (peer.channels[std::string(t->name())] = std::move(ch).value()).get();
      }
      tried += (tried.empty() ? "" : "; ") + std::string(t->name()) + ": " + ch.status().ToString();
      disagree = disagree || (agreed && *agreed != ch.status().code());
      agreed = ch.status().code();
    }
  }
  if (tried.empty())
    return Status::NotSupported(
        "cannot connect to peer '" + peer.meta.name + "': no enabled transport moves " +
        MemoryKindName(local) + " to " + MemoryKindName(remote) + " memory to it (this agent's " +
        (unreached.empty() ? "transports move none of them" : unreached + " cannot reach it") +
        "; the peer offers " + PeerOffers(peer.meta) + ")");
  return Status(ConnectFailureCode(disagree ? std::nullopt : agreed),
                "cannot connect to peer '" + peer.meta.name + "': " + tried);
}

Result<std::string> AgentImpl::PeerTransport(std::string_view name, MemoryKind kind) {
  auto peer = FindPeer(name);
  if (!peer) return Status::NotFound("unknown peer '" + std::string(name) + "'");
  KVLANE_ASSIGN_OR_RETURN(Channel * ch, EnsureChannel(*peer, kind, kind));
  return std::string(ch->transport());
}

Result<Channel*> AgentImpl::PeerChannel(std::string_view name, MemoryKind kind) {
  auto peer = FindPeer(name);
  if (!peer) return Status::NotFound("unknown peer '" + std::string(name) + "'");
  return EnsureChannel(*peer, kind, kind);
}

uint16_t AgentImpl::metadata_port() const { return metadata_server_ ? metadata_server_->port() : 0; }

Status AgentImpl::PeerError(std::string_view name) const {
  auto peer = FindPeer(name);
  if (!peer) return Status::NotFound("unknown peer '" + std::string(name) + "'");
  std::lock_guard lock(peer->mu);
  for (auto& [t, ch] : peer->channels) KVLANE_RETURN_IF_ERROR(ch->latch().Get());
  return Status::Ok();
}

Status AgentImpl::SendNotification(std::string_view name, std::string_view bytes) {
  auto peer = FindPeer(name);
  if (!peer) return Status::NotFound("unknown peer '" + std::string(name) + "'");
  if (bytes.size() > kMaxNotifyBytes)
    return Status::InvalidArgument("notification larger than 64 KiB");
  // Any open channel will do (its control path is ordered after our finished
  // transfers on it); otherwise open the host-memory one, else any.
  Channel* ch = nullptr;
  {
    std::lock_guard lock(peer->mu);
    if (!peer->channels.empty()) ch = peer->channels.begin()->second.get();
  }
  if (ch == nullptr) {
    auto host = EnsureChannel(*peer, MemoryKind::kHost, MemoryKind::kHost);
    // Device memory's channel only when no transport moves host memory to it:
    // a host connect that failed (timeout, refusal) is the answer as it is.
    if (!host.ok() && host.status().code() != Code::kNotSupported) return host.status();
    auto any = host.ok() ? host : EnsureChannel(*peer, MemoryKind::kCuda, MemoryKind::kCuda);
    if (!any.ok())  // both reasons: the host channel's is often the one that matters
      return Status(host.status().code(),
                    host.status().message() + "; device memory: " + any.status().message());
    ch = any.value();
  }
  KVLANE_RETURN_IF_ERROR(ch->latch().Get());
  return ch->Notify(bytes);
}

}  // namespace kvlane::core
