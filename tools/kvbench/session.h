// Session: one rank's state for a run: the control channel to the other rank,
// the agreed plan, the pool (allocated and registered in its pieces), the agent
// and the loaded peer. Built in three steps (handshake, pool + agent, metadata
// exchange) by Open(). Owns everything it holds; one thread at a time.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "control_channel.h"
#include "document.h"
#include "host_memory.h"
#include "host_pools.h"
#include "kvlane/agent.h"
#include "kvlane/provenance.h"
#include "path_choice.h"
#include "plan.h"
#include "pool_memory.h"
#include "pool_ops.h"
#include "run_config.h"

namespace kvbench {

inline constexpr int kTargetRank = 0;     // owns the pool the initiator reads and writes
inline constexpr int kInitiatorRank = 1;  // posts every transfer

class Session {
 public:
  // REQUIRES: config.rank is 0 or 1 and config was Resolve()d.
  static kvlane::Result<std::unique_ptr<Session>> Open(const RunConfig& config);
  ~Session();

  const RunConfig& config() const { return config_; }
  const Plan& plan() const { return plan_; }
  ControlChannel& control() { return *control_; }
  kvlane::Agent& agent() { return *agent_; }
  const kvlane::Agent& agent() const { return *agent_; }
  uint8_t* pool() const { return pool_->data(); }
  PoolView pool_view() const { return {pool_->data(), kind(), device_}; }
  // The transport and both ranks' pool memory, as both ranks resolved and agreed on.
  const DataPath& path() const { return path_; }
  // This rank's pool memory, and the peer's (they differ for a mixed --memory pair).
  kvlane::MemoryKind kind() const { return path_.Of(config_.rank); }
  kvlane::MemoryKind peer_kind() const { return path_.Of(1 - config_.rank); }
  int device() const { return device_; }  // this rank's GPU; meaningful for a device pool only
  int remote_device() const { return remote_device_; }  // the peer's, likewise
  uint64_t remote_pool_base() const { return remote_base_; }
  const std::string& peer_name() const { return peer_name_; }
  const std::string& transport_resolved() const { return path_.transport; }
  const std::string& transport_used() const { return transport_used_; }
  const RankInfo& self() const { return self_; }
  const RankInfo& peer() const { return peer_info_; }
  double register_ms() const { return register_ms_; }
  // Where the pool budget came from: the flag or environment, host or GPU free memory.
  const std::string& budget_source() const { return budget_source_; }
  // This rank's host memory bound as read when the ranks agreed on the plan
  // (HostMemory::Bytes and Describe; bytes 0: unknown).
  const MemoryBound& host_bound() const { return host_bound_; }
  // The bound both ranks' host pools were checked against together (SharedBound);
  // none when the ranks are on two hosts.
  const std::optional<MemoryBound>& shared_bound() const { return shared_bound_; }
  // Whether the ranks share a host (host_pools.h SameHost: the boot ids decide
  // where both are known); nullopt before the plan messages were exchanged.
  std::optional<bool> same_host() const { return same_host_; }

 private:
  explicit Session(const RunConfig& config) : config_(config) {}
  kvlane::Status Handshake();
  // The control secret's mutual proof after the hellos (control_secret.h);
  // `my_hello` is this rank's hello, `hello` the peer's. With a secret, the channel is sealed
  // after the proofs, keyed over both hellos too. Without a secret on either rank:
  // Ok. A mismatch (one rank has one) or a wrong proof: kInvalidArgument naming
  // what to pass.
  kvlane::Status Authenticate(const nlohmann::json& my_hello, const nlohmann::json& hello);
  kvlane::Status ResolveTransport();
  kvlane::Status SelectDevice(int gpus);
  kvlane::Status AgreeOnPath(const kvlane::Status& resolved);
  kvlane::Status SettleBudget();
  kvlane::Status AgreeOnPlan();
  // `boot_id` and `host`: what this rank sent in its plan message.
  kvlane::Status CheckHostMemory(const nlohmann::json& theirs, const std::string& boot_id,
                                 const HostMemory& host);
  kvlane::Status CreateAgent();
  kvlane::Status RegisterPool();
  kvlane::Status ExchangeMetadata();

  RunConfig config_;
  Plan plan_;
  std::unique_ptr<ControlChannel> control_;
  std::unique_ptr<PoolMemory> pool_;
  std::unique_ptr<kvlane::Agent> agent_;
  std::vector<kvlane::RegionId> regions_;
  RankInfo self_, peer_info_;
  std::string nonce_;  // this rank's hello nonce (64 hex digits)
  DataPath path_;
  std::string transport_used_, peer_name_, budget_source_;
  MemoryBound host_bound_;
  std::optional<MemoryBound> shared_bound_;
  std::optional<bool> same_host_;  // SameHost, once the plan messages were exchanged
  uint64_t remote_base_ = 0;
  int device_ = 0;
  int remote_device_ = 0;
  double register_ms_ = 0;
};

using kvlane::HostName;

}  // namespace kvbench
