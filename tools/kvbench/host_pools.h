// Whether the two ranks' KV pools fit in their host's memory together. Each rank
// checks its own pool against the memory it may take (MemAvailable, or its cgroup's
// headroom where smaller: host_memory.h) just before populating it
// (PoolMemory::Allocate); two ranks on one host also share that memory, which
// neither sees alone: two pools that each fit could together wake the OOM killer.
// Pure logic on numbers the ranks exchange (Session::AgreeOnPlan); thread-safe.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "kvlane/status.h"

namespace kvbench {

// What tells one host from another: its host name and its kernel's boot id.
struct HostIdentity {
  std::string hostname;
  std::string boot_id;  // empty: unknown (never equal to another host's)
};

// This host's boot id (/proc/sys/kernel/random/boot_id), empty where unreadable.
// Containers of one host share it, even under different host names.
std::string BootId();

// Whether the ranks share a host's memory: the transport works within one host
// only (shm, local), or both boot ids are known and agree; where either boot id is
// unknown, their host names agree (an empty or "unknown" host name never matches).
bool SameHost(const std::string& transport, const HostIdentity& mine, const HostIdentity& peer);

// What the peer's plan message `theirs` (untrusted) says of its host: its boot id
// (empty when missing or not a string), "mem_available", the host memory bound that
// applies to it (HostMemory::Bytes; 0 when missing, not an integer, or <= 0: a
// negative used to wrap to a huge number), and "mem_bound", which bound that is
// (HostMemory::Describe; empty when missing or not a string: a peer that sent none
// read MemAvailable alone).
struct PeerHost {
  std::string boot_id;
  uint64_t mem_available = 0;
  std::string mem_bound;
};
PeerHost ReadPeerHost(const nlohmann::json& theirs);

// Both ranks' pools as they lie in host memory.
struct HostPools {
  uint64_t target_bytes = 0;     // rank 0's pool in host memory, B (0: it is on a GPU)
  uint64_t initiator_bytes = 0;  // rank 1's, likewise
  // The host memory the ranks may take before either allocated (the smaller of the
  // two ranks' bounds, HostMemory::Bytes); 0: unknown.
  uint64_t mem_available = 0;
  // Which bound that is (HostMemory::Describe); empty: "MemAvailable <mem_available>".
  std::string mem_bound;
};

// The smaller of this rank's host memory bound (`mine`, `my_bound`) and the peer's,
// a 0 being unknown, with its description; the peer's is named as rank `peer_rank`'s.
// Both unknown: 0.
struct MemoryBound {
  uint64_t bytes = 0;
  std::string description;
};
MemoryBound SmallerBound(uint64_t mine, const std::string& my_bound, const PeerHost& peer,
                         int peer_rank);

// Ok where the ranks are on different hosts (`same_host` false: each checks its
// own pool), where the bound is unknown, or where both host pools together fit
// in 90% of it (PoolMemory::Allocate's margin for one pool). Else kInvalidArgument
// naming both pools, their sum and the bound (MemAvailable, or a cgroup's limit and
// usage).
kvlane::Status CheckSharedHostMemory(const HostPools& pools, bool same_host);

}  // namespace kvbench
