// Whether the two ranks' KV pools fit in their host's memory together. Each rank
// checks its own pool against the memory it may take (MemAvailable, or its cgroup's
// headroom where smaller: host_memory.h) just before populating it
// (PoolMemory::Allocate); two ranks on one host also share memory that neither sees
// alone: the host's MemAvailable, and a cgroup limit when both are in that cgroup.
// Two pools that each fit could together wake the OOM killer. Pure logic on numbers
// the ranks exchange (Session::AgreeOnPlan); thread-safe.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "host_memory.h"
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

// What this rank's plan message says of its memory: "mem_available", the bound that
// applies (HostMemory::Bytes) and "mem_bound", its description, as builds before
// "host_memory" read them; and "host_memory": {"mem_available": MemAvailable (absent:
// unknown), "cgroup": {"room", "dev", "ino"} (absent: no cgroup limit; "dev" and "ino"
// absent: its identity unknown), the cgroup being the one that leaves least room, and
// "cgroups": [{"room", "dev", "ino"}, ...], every limited cgroup of HostMemory::limits
// whose identity is known, at most kMaxCgroups of them (sent even when empty)}.
nlohmann::json HostMemoryFields(const HostMemory& host);

// Limited cgroups a rank lists, and reads of its peer's: more than any real nesting.
inline constexpr size_t kMaxCgroups = 64;

// The peer's cgroup limit as it reported it: the room it leaves, and which cgroup.
struct PeerCgroup {
  uint64_t room = 0;  // B; 0: none left
  CgroupId id;        // unknown: never the same as this rank's
};

// What the peer's plan message `theirs` (untrusted) says of its host. Each field
// missing, of another type, negative or over 2^60 B is absent (the number 0 below,
// or no cgroup). The peer's text ("mem_bound") is not read: errors are worded here.
struct PeerHost {
  std::string boot_id;
  // Whether it sent "host_memory" (MemAvailable and cgroup room apart). A build before
  // it sent "mem_available" alone: the smaller of the two, which is then `mem_available`.
  bool apart = false;
  uint64_t mem_available = 0;        // B; 0: unknown
  std::optional<PeerCgroup> cgroup;  // apart only: the one that leaves it least room
  // Whether it sent "cgroups" (a build before it compared the tightest cgroups alone),
  // and the cgroups listed there with their identities (the first kMaxCgroups
  // well-formed entries).
  bool listed = false;
  std::vector<PeerCgroup> cgroups;
};
PeerHost ReadPeerHost(const nlohmann::json& theirs);

// A bound on host memory and what it is, for an error and the document.
struct MemoryBound {
  uint64_t bytes = 0;  // 0: unknown
  std::string description;
};

// What both ranks' host pools together are checked against, on one host: the smaller
// of the two ranks' MemAvailable and, for each limited cgroup both are under (the
// same CgroupId in this rank's HostMemory::limits and the peer's `cgroups`: their
// cgroup, or a common ancestor such as a pod's or a slice's), of that cgroup's room
// as either reads it (a cgroup with no room is 1 B). A cgroup of one rank alone is not
// shared: each pool is charged to its own, and PoolMemory::Allocate checks it there.
// A peer that sent no "cgroups" (!listed) compared the tightest cgroups alone, so
// that is done here too: both ranks decide alike. A peer of an older build (!apart): the smaller
// of this rank's HostMemory::Bytes and the peer's bound, as that build decides. The
// peer's figures are named as rank `peer_rank`'s. Both unknown: 0.
MemoryBound SharedBound(const HostMemory& mine, const PeerHost& peer, int peer_rank);

// Both ranks' pools as they lie in host memory.
struct HostPools {
  uint64_t target_bytes = 0;     // rank 0's pool in host memory, B (0: it is on a GPU)
  uint64_t initiator_bytes = 0;  // rank 1's, likewise
  // The host memory both may take together (SharedBound); bytes 0: unknown.
  MemoryBound bound;
};

// Ok where the ranks are on different hosts (`same_host` false: each checks its
// own pool), where the bound is unknown, or where both host pools together fit
// in 90% of it (PoolMemory::Allocate's margin for one pool). Else kInvalidArgument
// naming both pools, their sum and the bound.
kvlane::Status CheckSharedHostMemory(const HostPools& pools, bool same_host);

}  // namespace kvbench
