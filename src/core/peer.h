// PeerState: what this agent knows of one peer (its metadata) and the channels
// to it (at most one per transport), each opened on first use. Kept alive by
// every prepared list and transfer that refers to it; its destruction closes
// the channels.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "core/channel.h"
#include "core/metadata.h"

namespace kvlane::core {

struct PeerState {
  explicit PeerState(AgentMeta m) : meta(std::move(m)) {}
  ~PeerState() { CloseAll(); }
  // REQUIRES: mu held, or no other thread can reach this peer.
  void StopAll() {
    for (auto& [name, ch] : channels) ch->StopLanes();
  }
  // Stops every channel before the first one frees (see Channel::StopLanes).
  // REQUIRES: as StopAll.
  void CloseAll() {
    StopAll();
    for (auto& [name, ch] : channels) ch->Close();
  }

  // Held across a refresh of `meta` (LoadPeer, which asks the channels first:
  // Channel::PeerTableChanged) and across a channel's opening (its dial
  // included: EnsureChannel), so that every channel confirms the table it
  // serves. `mu` is held across nothing slow but Close (exclusive: Agent::Close).
  // Lock order: refresh_mu, then mu.
  std::mutex refresh_mu;
  std::mutex mu;
  // Written holding refresh_mu and mu (pieces refresh on reload); read holding
  // either.
  AgentMeta meta;
  // By transport. Added holding refresh_mu and mu; read holding mu.
  std::map<std::string, std::unique_ptr<Channel>, std::less<>> channels;
};

// A prepared descriptor list: each descriptor split at piece boundaries.
struct PreparedList {
  bool remote = false;
  MemoryKind kind = MemoryKind::kHost;
  std::shared_ptr<PeerState> peer;              // remote lists only
  std::vector<std::vector<PieceRange>> descs;   // one entry per descriptor
  std::vector<uint64_t> lens;
};

}  // namespace kvlane::core
