#include "session.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <thread>

#include "control_secret.h"
#include "device_memory.h"
#include "hello.h"
#include "host_memory.h"
#include "host_pools.h"
#include "json_field.h"
#include "plan_report.h"
#include "slurm.h"

namespace kvbench {
namespace {

using nlohmann::json;

// The peer's metadata blob from its hex text (untrusted): empty, which LoadPeer
// refuses, when it is not hex.
std::string PeerBlob(const std::string& hex) {
  std::string blob;
  return FromHex(hex, &blob) ? blob : std::string();
}

// Sends this rank's hello `mine` and reads the peer's (any message but a hello,
// or none within the channel's bound, is an error).
kvlane::Result<json> ExchangeHellos(ControlChannel* control, const json& mine) {
  KVLANE_RETURN_IF_ERROR(control->Send(mine));
  return control->Expect("hello");
}

kvlane::Result<kvlane::ProgressPolicy> Policy(const std::string& name) {
  if (name == "independent") return kvlane::ProgressPolicy::kIndependent;
  if (name == "global-fifo") return kvlane::ProgressPolicy::kGlobalFifo;
  return kvlane::Status::InvalidArgument("unknown policy '" + name + "'");
}

// The automatic pool budget of the rank that sent budget message `m`: a share of
// its GPU's free memory for a device pool ("device" >= 0; half when `shared_gpu`),
// else its host budget.
uint64_t AnnouncedBudget(const json& m, bool shared_gpu, uint64_t fallback) {
  if (TypedField<int64_t>(m, "device").value_or(-1) < 0)
    return TypedField<uint64_t>(m, "host_budget").value_or(0);
  return DevicePoolBudget(fallback, TypedField<uint64_t>(m, "device_free").value_or(0),
                          shared_gpu ? 2 : 1);
}

// What a rank announces of its resolved path: the transport, its own pool's memory
// and the memory its flags give the peer's pool.
json Announce(const DataPath& path, int rank, const std::string& staging_copy) {
  return {{"transport", path.transport},
          {"memory", MemoryFlagName(path.Of(rank))},
          {"peer_memory", MemoryFlagName(path.Of(1 - rank))},
          {"staging_copy", staging_copy}};
}

// Whether the peer's announcement `theirs` matches `mine`: the same transport and
// staging copy (the document records one), its pool where this rank's flags put
// it, and this rank's pool where its flags do.
bool Agree(const json& mine, const json& theirs) {  // theirs: untrusted, any JSON
  const auto said = [&](const char* key) { return TypedField<std::string>(theirs, key); };
  return said("transport") == mine["transport"] && said("staging_copy") == mine["staging_copy"] &&
         said("memory") == mine["peer_memory"] && said("peer_memory") == mine["memory"];
}

// Whether `host_port` names this host's loopback interface (only this host's
// processes can connect there).
bool LoopbackPeer(const std::string& host_port) {
  std::string host;
  uint16_t port = 0;
  if (!SplitHostPort(host_port, &host, &port).ok()) return false;
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

}  // namespace

kvlane::Result<std::unique_ptr<Session>> Session::Open(const RunConfig& config) {
  std::unique_ptr<Session> s(new Session(config));
  // Bad flags fail before connecting; an automatic budget may still change.
  auto early = PlanFromFlags(config.grid, config.plan_defaults);
  if (!early.ok() && !config.pool_budget_auto) {
    // A listener handed over is this session's to close: left open, it would
    // take rank 1's connect into its queue, and rank 1 would wait out its
    // control timeout instead of being refused at once.
    if (config.listen_fd >= 0) close(config.listen_fd);
    return early.status();
  }
  KVLANE_RETURN_IF_ERROR(s->Handshake());
  KVLANE_RETURN_IF_ERROR(s->AgreeOnPath(s->ResolveTransport()));
  KVLANE_RETURN_IF_ERROR(s->SettleBudget());
  KVLANE_RETURN_IF_ERROR(s->AgreeOnPlan());
  KVLANE_ASSIGN_OR_RETURN(s->pool_,
                          PoolMemory::Allocate(s->plan_.layout.bytes, s->kind(), s->device_));
  KVLANE_RETURN_IF_ERROR(s->CreateAgent());
  KVLANE_RETURN_IF_ERROR(s->RegisterPool());
  KVLANE_RETURN_IF_ERROR(s->ExchangeMetadata());
  return s;
}

// Deregistering waits for the transfers in flight on the pool (a burst may leave
// some running past its timeout: burst.h), so the pool is freed after them. A GPU
// that stopped answering may keep a copy of a region (kBackend): that pool is never
// freed, as the engine asks.
Session::~Session() {
  bool in_use = false;
  for (kvlane::RegionId r : regions_) {
    in_use |= agent_->DeregisterMemory(r).code() == kvlane::Code::kBackend;
  }
  agent_.reset();  // before the pool it registered
  if (!in_use) return;
  fmt::print(stderr, "kvbench: a GPU still holds part of the pool; it is left allocated\n");
  (void)pool_.release();
}

kvlane::Status Session::Handshake() {
  const RunConfig& c = config_;
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + c.control_timeout_ms;
  const WaitNotice notice{[&](std::chrono::milliseconds) {  // counted from the handshake's start
    const auto waited =
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - start);
    fmt::print(stderr, "kvbench rank {}: waiting for rank {} {} {} ({} of {} s)\n", c.rank,
               1 - c.rank, c.rank == kTargetRank ? "to connect to" : "to listen at", c.peer,
               waited.count(), c.control_timeout_ms.count() / 1000);
  }};
  if (c.secret.empty() && !LoopbackPeer(c.peer)) {
    fmt::print(stderr,
               "kvbench rank {}: warning: the control connection to {} is not authenticated "
               "(no --secret-file or KVBENCH_SECRET_FILE): whoever connects first as rank {} "
               "gets this rank's engine metadata, which reaches its pool\n",
               c.rank, c.peer, 1 - c.rank);
  }
  self_ = {c.rank,
           c.rank == kTargetRank ? "target" : "initiator",
           HostName(),
           {"host"},
           kvlane::VersionString()};
  // This rank's hello, with a fresh nonce_ for each connection: a proof seen on
  // one cannot be replayed on the next.
  const auto hello_with_fresh_nonce = [&]() -> kvlane::Result<json> {
    KVLANE_ASSIGN_OR_RETURN(nonce_, NewNonce());
    return json{{"type", "hello"},
                {"protocol", kControlProtocol},
                {"version", kvlane::VersionString()},
                {"rank", c.rank},
                {"hostname", self_.hostname},
                {"role", self_.role},
                {"devices", self_.devices},
                {"nonce", nonce_},
                {"auth", c.secret.empty() ? "none" : "secret"}};
  };
  if (c.rank != kTargetRank) {
    KVLANE_ASSIGN_OR_RETURN(control_,
                            ControlChannel::Connect(c.peer, c.control_timeout_ms, notice));
    // The whole control timeout: rank 0 may first be dropping a stray connection.
    control_->Bound(std::chrono::steady_clock::now() + c.control_timeout_ms, kMaxHelloBytes);
    KVLANE_ASSIGN_OR_RETURN(const json mine, hello_with_fresh_nonce());
    auto hello = ExchangeHellos(control_.get(), mine);
    if (!hello.ok()) return NotAPeer(c.rank, c.peer, hello.status());
    // The proof first, as rank 0 takes it: rank 0 then reads the hello and names
    // both builds when they differ (it would only see this rank leave otherwise).
    KVLANE_RETURN_IF_ERROR(Authenticate(mine, hello.value()));
    KVLANE_RETURN_IF_ERROR(ReadHello(c.rank, hello.value(), &peer_info_));
    control_->Unbound();
    return kvlane::Status::Ok();
  }
  // Rank 0 takes whatever connects first: a stray connection (a port scan, a
  // client of another service) must not end the run. One that sends no kvbench
  // hello within kHelloWait is dropped, and rank 0 listens again until its control
  // timeout, its listener open all along (a rank 1 connecting meanwhile waits in
  // its queue). A kvbench hello of another protocol or rank ends the run.
  KVLANE_ASSIGN_OR_RETURN(auto listener, c.listen_fd >= 0
                                             ? ControlListener::Adopt(c.listen_fd, c.peer)
                                             : ControlListener::Listen(c.peer));
  int drops = 0;
  std::string last_drop;
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    auto accepted = left.count() > 0 ? listener->Accept(left, notice)
                                     : kvlane::Result<std::unique_ptr<ControlChannel>>(
                                           kvlane::Status::Timeout("no time left"));
    if (!accepted.ok() && accepted.status().code() == kvlane::Code::kTimeout) {
      return kvlane::Status::Timeout(fmt::format(
          "control: no kvbench rank 1 said hello on {} within {} ms{}", c.peer,
          c.control_timeout_ms.count(),
          drops == 0
              ? std::string()
              : fmt::format(" ({} connection(s) dropped that were no kvbench rank of this run; the "
                            "last: {})",
                            drops, last_drop)));
    }
    std::string from = "?";
    kvlane::Status why;
    if (accepted.ok()) {
      control_ = std::move(accepted).value();
      // Its waits get the whole control timeout, not what the accept had left
      // (a stray dropped before it, a rank 1 started late).
      control_->set_timeout(c.control_timeout_ms);
      from = control_->PeerAddress();
      control_->Bound(std::min(std::chrono::steady_clock::now() + kHelloWait, deadline),
                      kMaxHelloBytes);
      KVLANE_ASSIGN_OR_RETURN(const json mine, hello_with_fresh_nonce());
      auto hello = ExchangeHellos(control_.get(), mine);
      why = hello.ok() ? kvlane::Status::Ok() : NotAPeer(c.rank, c.peer, hello.status());
      // With a secret, what has not proved it is dropped before its hello is read:
      // an unproven client cannot end the run by claiming another build.
      if (why.ok() && !c.secret.empty()) why = Authenticate(mine, hello.value());
      if (why.ok()) {
        control_->Unbound();
        KVLANE_RETURN_IF_ERROR(ReadHello(c.rank, hello.value(), &peer_info_));
        // Proved above with a secret; without one, this refuses a peer that has one.
        return c.secret.empty() ? Authenticate(mine, hello.value()) : kvlane::Status::Ok();
      }
      // A kvbench rank without the secret (or with another) learns why it is dropped.
      if (hello.ok()) (void)control_->Send({{"type", "error"}, {"message", why.message()}});
      control_.reset();
    } else {  // a connection that ended before it was taken (ECONNABORTED), no fd left (EMFILE)
      why = accepted.status();
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ++drops;
    last_drop = why.message();
    fmt::print(stderr, "kvbench rank 0: dropped a connection from {}: {}; listening on {} again\n",
               from, why.message(), c.peer);
  }
}

// Both ranks hold a control secret or neither does (the hello's "auth"); with one,
// rank 1 sends its proof first and rank 0 answers with its own once rank 1's
// matched, so neither sends anything more to what has not proved the secret.
kvlane::Status Session::Authenticate(const json& my_hello, const json& hello) {  // hello: untrusted
  const RunConfig& c = config_;
  const int other = 1 - c.rank;
  // Rank 0's drop notice names the connection's address; rank 1 names --peer.
  const std::string who = c.rank == kTargetRank ? fmt::format("rank {}", other)
                                                : fmt::format("rank {} ({})", other, c.peer);
  const bool mine = !c.secret.empty();
  const bool theirs = TypedField<std::string>(hello, "auth").value_or("none") == "secret";
  if (mine != theirs) {
    return kvlane::Status::InvalidArgument(fmt::format(
        "{}: pass the same --secret-file (or KVBENCH_SECRET_FILE) to both ranks",
        mine ? fmt::format("this rank holds a control secret and {} sent no proof of one (no "
                           "--secret-file, or a kvbench older than the option)",
                           who)
             : fmt::format("{} holds a control secret and this rank has none", who)));
  }
  if (!mine) return kvlane::Status::Ok();
  const std::string their_nonce = TypedField<std::string>(hello, "nonce").value_or("");
  std::string unused;
  if (their_nonce.size() != 64 || !FromHex(their_nonce, &unused))
    return kvlane::Status::InvalidArgument(fmt::format("rank {}'s hello carries no nonce", other));
  const std::string& n0 = c.rank == kTargetRank ? nonce_ : their_nonce;
  const std::string& n1 = c.rank == kTargetRank ? their_nonce : nonce_;
  const std::string mac = ControlProof(c.secret, c.rank, n0, n1);
  // The MAC keys cover both hellos as this rank sent and read them (rank 0's
  // first): a hello altered on the way (host name, role, devices, version) leaves
  // the ranks with different keys, and the first sealed message fails its MAC.
  const std::string hellos = c.rank == kTargetRank ? my_hello.dump() + "\n" + hello.dump()
                                                   : hello.dump() + "\n" + my_hello.dump();
  std::string send_key = ControlMacKey(c.secret, c.rank, n0, n1, hellos),
              receive_key = ControlMacKey(c.secret, other, n0, n1, hellos);
  if (mac.empty() || send_key.empty() || receive_key.empty())
    return kvlane::Status::Backend("control: HMAC-SHA256 failed (libcrypto)");
  const json proof = {{"type", "proof"}, {"proof", mac}};
  if (c.rank != kTargetRank) KVLANE_RETURN_IF_ERROR(control_->Send(proof));
  KVLANE_ASSIGN_OR_RETURN(json m, control_->Expect("proof"));
  if (!ProofMatches(c.secret, other, n0, n1, TypedField<std::string>(m, "proof").value_or(""))) {
    return kvlane::Status::InvalidArgument(
        fmt::format("{} did not prove the control secret: it holds another one", who));
  }
  if (c.rank == kTargetRank) KVLANE_RETURN_IF_ERROR(control_->Send(proof));
  // Both proofs went: every later message carries a MAC (rank 0 seals after
  // sending its proof, rank 1 after checking it, the same point of the exchange).
  control_->Seal(std::move(send_key), std::move(receive_key));
  return kvlane::Status::Ok();
}

// An automatic budget comes from free memory where the pool lives: the host's
// (RunConfig::Resolve) or, for a device pool (whatever the transport), the GPU's
// (DevicePoolBudget, split when both ranks' pools share the GPU). Each rank's is
// computed from what it announced, so a host pool on one rank and a device pool on
// the other each count their own memory. Two automatic budgets settle on the
// smaller; an explicit one is kept as given (AgreeOnPlan then insists that the
// plans match).
kvlane::Status Session::SettleBudget() {
  const bool on_gpu = kind() == kvlane::MemoryKind::kCuda;
  const uint64_t host = config_.pool_budget_auto ? std::stoull(config_.grid.pool_budget) : 0;
  json mine = {{"type", "budget"},
               {"auto", config_.pool_budget_auto},
               {"host_budget", host},
               {"device", on_gpu ? device_ : -1},
               {"device_free", on_gpu ? DeviceFreeBytes(device_) : uint64_t{0}}};
  KVLANE_RETURN_IF_ERROR(control_->Send(mine));
  KVLANE_ASSIGN_OR_RETURN(json peer, control_->Expect("budget"));
  budget_source_ = "--pool-budget / KVBENCH_POOL_BUDGET";
  if (!config_.pool_budget_auto) return kvlane::Status::Ok();
  const bool shared = on_gpu && self_.hostname == peer_info_.hostname &&
                      TypedField<int64_t>(peer, "device").value_or(-1) == device_;
  const uint64_t fallback = config_.plan_defaults.pool_budget;
  uint64_t budget = AnnouncedBudget(mine, shared, fallback);
  if (TypedField<bool>(peer, "auto").value_or(false))
    budget = std::min(budget, AnnouncedBudget(peer, shared, fallback));
  budget_source_ = !on_gpu  ? "host memory / 4 (MemAvailable, or a cgroup's headroom if smaller)"
                   : shared ? "GPU free memory x 0.8 / 2 (one GPU, two ranks)"
                            : "GPU free memory x 0.8";
  config_.grid.pool_budget = std::to_string(budget);
  return kvlane::Status::Ok();
}

// Everything that shapes the plan must match, or the ranks would move different bytes;
// so must the seed, or each rank would place the requests by its own block tables and
// every row would fail verification as if the transfer had corrupted it. The plan
// message also carries this host's boot id and memory (CheckHostMemory): read
// before sending, so before either rank allocates (each allocates only after the
// peer's plan message came).
kvlane::Status Session::AgreeOnPlan() {
  KVLANE_ASSIGN_OR_RETURN(plan_, PlanFromFlags(config_.grid, config_.plan_defaults));
  json plan = PlanToJson(plan_);
  const HostMemory host = ReadHostMemory();
  const std::string boot_id = BootId();
  json mine = {{"type", "plan"}, {"plan", plan}, {"seed", config_.seed}, {"boot_id", boot_id}};
  mine.update(HostMemoryFields(host));
  KVLANE_RETURN_IF_ERROR(control_->Send(mine));
  KVLANE_ASSIGN_OR_RETURN(json theirs, control_->Expect("plan"));
  const json& their_plan = FieldOrNull(theirs, "plan");
  if (their_plan != plan) {
    return kvlane::Status::InvalidArgument(
        "the ranks disagree on the plan (pass the same grid flags and budgets to both); "
        "this rank: " +
        plan["options"].dump() + ", peer: " + PeerJson(FieldOrNull(their_plan, "options"), 512));
  }
  const std::optional<uint64_t> peer_seed = TypedField<uint64_t>(theirs, "seed");
  if (peer_seed != config_.seed) {
    return kvlane::Status::InvalidArgument(
        fmt::format("the ranks disagree on --seed (this rank {}, peer {}): pass the same to both",
                    config_.seed, peer_seed.has_value() ? std::to_string(*peer_seed) : "none"));
  }
  return CheckHostMemory(theirs, boot_id, host);
}

// Two ranks on one host share its memory: both host pools are checked together against
// the memory they share (SharedBound: the smaller MemAvailable, and each limited cgroup
// both are under), so that both ranks decide alike and both refuse before either allocates.
kvlane::Status Session::CheckHostMemory(const json& theirs, const std::string& boot_id,
                                        const HostMemory& host) {
  const HostIdentity mine{self_.hostname, boot_id};
  const PeerHost theirs_host = ReadPeerHost(theirs);  // untrusted: read field by field
  const HostIdentity peer{peer_info_.hostname, theirs_host.boot_id};
  auto on_host = [&](int rank) {
    return path_.Of(rank) == kvlane::MemoryKind::kHost ? plan_.layout.bytes : uint64_t{0};
  };
  HostPools pools;
  pools.target_bytes = on_host(kTargetRank);
  pools.initiator_bytes = on_host(kInitiatorRank);
  pools.bound = SharedBound(host, theirs_host, 1 - config_.rank);
  host_bound_ = {host.Bytes(), host.Describe()};
  const bool same_host = SameHost(path_.transport, mine, peer);
  same_host_ = same_host;
  if (same_host) shared_bound_ = pools.bound;
  return CheckSharedHostMemory(pools, same_host);
}

// Resolves --transport and --memory for this rank (path_choice.h); a device pool
// then gets its GPU (--device applies to the ranks whose pool is on one).
// "One host" here is the host name, not the boot id that the memory check uses
// (SameHost): two containers of one kernel share its memory, but with host
// names of their own they usually have their own /dev/shm and IPC namespace
// too, where shm or CUDA IPC between them would fail and TCP works.
kvlane::Status Session::ResolveTransport() {
  const int gpus = DeviceCount();
  auto path = ResolveDataPath(config_.transport, config_.memory,
                              self_.hostname == peer_info_.hostname, gpus, config_.rank);
  if (!path.ok()) {
    return kvlane::Status(
        path.status().code(),
        fmt::format("{} (this rank on {}, the peer on {}; {} GPU(s) visible here)",
                    path.status().message(), self_.hostname, peer_info_.hostname, gpus));
  }
  path_ = path.value();
  if (kind() != kvlane::MemoryKind::kCuda) return kvlane::Status::Ok();  // --device unused
  return SelectDevice(gpus);
}

// --device, else DefaultDevice (path_choice.h): on one host the ranks split over
// two GPUs, across hosts each takes its host's GPU 0 (or its local rank's).
// REQUIRES: gpus >= 1.
kvlane::Status Session::SelectDevice(int gpus) {
  const bool same_host = self_.hostname == peer_info_.hostname;
  device_ = config_.device >= 0 ? config_.device
                                : DefaultDevice(config_.rank, same_host, LocalRank(), gpus);
  if (device_ >= gpus) {
    return kvlane::Status::InvalidArgument("--device " + std::to_string(device_) + " but only " +
                                           std::to_string(gpus) + " GPU(s) are visible");
  }
  self_.devices = {"cuda:" + std::to_string(device_) + " " + DeviceName(device_)};
  return kvlane::Status::Ok();
}

// Both ranks must resolve the same transport and the same memory for each rank's
// pool, or one would register host memory where the other expects a device pool:
// a rank whose flags or machine resolve differently stops both here, before any
// pool is sized. Each rank announces its own pool's memory and what its flags give
// the peer's, and checks the peer's announcement against its own pair (Agree).
// Each rank sends one message and reads one: a rank that could not resolve sends
// why (its peer fails with "peer reported: ...") and still reads the peer's
// message, so that it closes with nothing unread (an orderly close, not a reset
// that could discard the reason before the peer reads it).
kvlane::Status Session::AgreeOnPath(const kvlane::Status& resolved) {
  if (!resolved.ok()) {
    (void)control_->Send({{"type", "error"}, {"message", resolved.message()}});
    (void)control_->Receive();
    return resolved;
  }
  json mine = Announce(path_, config_.rank, config_.staging_copy);
  KVLANE_RETURN_IF_ERROR(control_->Send({{"type", "path"}, {"path", mine}}));
  KVLANE_ASSIGN_OR_RETURN(json theirs, control_->Expect("path"));
  const json& their_path = FieldOrNull(theirs, "path");
  if (!Agree(mine, their_path)) {
    return kvlane::Status::InvalidArgument(
        "the ranks disagree on the data path (pass the same --transport, --memory and "
        "--staging-copy to both; a pair names the target's memory first); this rank (" +
        self_.role + "): " + mine.dump() + ", peer: " + PeerJson(their_path, 512));
  }
  return kvlane::Status::Ok();
}

kvlane::Status Session::CreateAgent() {
  kvlane::AgentOptions o;
  o.name = "kvbench-" + self_.role + "-" + std::to_string(getpid());
  o.transports = {path_.transport};
  if (config_.listen_host == "auto") {
    KVLANE_ASSIGN_OR_RETURN(o.tcp_listen_host, control_->LocalAddress());
  } else {
    o.tcp_listen_host = config_.listen_host;
  }
  if (config_.lanes > 0) o.lanes_per_peer = config_.lanes;
  o.piece_bytes = plan_.options.piece_bytes;
  KVLANE_ASSIGN_OR_RETURN(o.policy, Policy(config_.policy));
  KVLANE_ASSIGN_OR_RETURN(o.staging_copy, kvlane::ParseStagingCopy(config_.staging_copy));
  KVLANE_ASSIGN_OR_RETURN(agent_, kvlane::Agent::Create(o));
  return kvlane::Status::Ok();
}

kvlane::Status Session::RegisterPool() {
  auto start = std::chrono::steady_clock::now();
  for (const Piece& p : plan_.layout.pieces) {
    auto id = agent_->RegisterMemory(pool_->data() + p.offset, p.bytes, kind(), device_);
    if (!id.ok()) {
      return kvlane::Status(
          id.status().code(),
          "registering pool piece " + std::to_string(regions_.size()) + " (" +
              std::to_string(p.bytes) + " B at offset " + std::to_string(p.offset) + " of " +
              std::to_string(plan_.layout.bytes) + " B): " + id.status().message());
    }
    regions_.push_back(id.value());
  }
  register_ms_ =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return kvlane::Status::Ok();
}

kvlane::Status Session::ExchangeMetadata() {
  KVLANE_ASSIGN_OR_RETURN(std::string blob, agent_->ExportMetadata());
  KVLANE_RETURN_IF_ERROR(control_->Send({{"type", "metadata"},
                                         {"blob", ToHex(blob)},
                                         {"pool_base", reinterpret_cast<uint64_t>(pool())},
                                         {"device", device_},
                                         {"devices", self_.devices}}));
  KVLANE_ASSIGN_OR_RETURN(json m, control_->Expect("metadata"));
  // Untrusted: read field by field; the engine checks every remote range against
  // the peer's registered pieces.
  remote_base_ = TypedField<uint64_t>(m, "pool_base").value_or(0);
  remote_device_ = static_cast<int>(std::clamp<int64_t>(
      TypedField<int64_t>(m, "device").value_or(0), -1, std::numeric_limits<int>::max()));
  if (const json& devices = FieldOrNull(m, "devices"); devices.is_array())
    peer_info_.devices = PeerStrings(devices, 64, 128);
  KVLANE_ASSIGN_OR_RETURN(
      peer_name_, agent_->LoadPeer(PeerBlob(TypedField<std::string>(m, "blob").value_or(""))));
  if (config_.rank == kInitiatorRank) {
    // Asked for this rank's kind; the agent enables one transport only, and a
    // transfer between this kind and the peer's (MakeTransfer) takes the same channel.
    KVLANE_ASSIGN_OR_RETURN(transport_used_, agent_->PeerTransport(peer_name_, kind()));
    if (transport_used_ != path_.transport) {  // fail closed: the declared path carries the bytes
      (void)control_->Send({{"type", "error"}, {"message", "transport mismatch"}});
      return kvlane::Status::NotAllowed("declared transport " + path_.transport +
                                        " but the engine "
                                        "chose " +
                                        transport_used_ + " for the peer");
    }
    return control_->Send({{"type", "ready"}, {"transport", transport_used_}});
  }
  KVLANE_ASSIGN_OR_RETURN(json ready, control_->Expect("ready"));
  // The initiator refuses any transport but the agreed one; so does this rank.
  if (TypedField<std::string>(ready, "transport") != path_.transport) {
    return kvlane::Status::InvalidArgument(
        "the initiator's engine reached this rank by another transport than the agreed " +
        path_.transport);
  }
  transport_used_ = path_.transport;
  return kvlane::Status::Ok();
}

}  // namespace kvbench
