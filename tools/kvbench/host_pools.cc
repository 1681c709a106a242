#include "host_pools.h"

#include <fmt/format.h>

#include <fstream>

#include "json_field.h"

namespace kvbench {
namespace {

constexpr uint64_t kMaxPeerBytes = uint64_t{1} << 60;  // more is no host's memory

double GiB(uint64_t bytes) { return bytes / double(1 << 30); }

// A byte count of the peer's: a non-negative integer up to kMaxPeerBytes, else nullopt.
std::optional<uint64_t> PeerBytes(const nlohmann::json& m, const char* key) {
  std::optional<uint64_t> v = TypedField<uint64_t>(m, key);
  if (v.has_value() && *v > kMaxPeerBytes) return std::nullopt;
  return v;
}

// One of the peer's cgroups, {"room", "dev", "ino"}: nullopt without a well-formed
// room; its identity unknown unless both dev and ino are.
std::optional<PeerCgroup> ReadPeerCgroup(const nlohmann::json& entry) {
  const std::optional<uint64_t> room = PeerBytes(entry, "room");
  if (!room.has_value()) return std::nullopt;
  PeerCgroup c{*room, {}};
  const std::optional<uint64_t> dev = TypedField<uint64_t>(entry, "dev");
  const std::optional<uint64_t> ino = TypedField<uint64_t>(entry, "ino");
  if (dev.has_value() && ino.has_value()) c.id = {*dev, *ino};
  return c;
}

// The well-formed entries of the peer's "cgroups" with a known identity, the first
// kMaxCgroups of them; none where it is not an array.
std::vector<PeerCgroup> ReadPeerCgroups(const nlohmann::json& list) {
  std::vector<PeerCgroup> all;
  if (!list.is_array()) return all;
  for (const nlohmann::json& entry : list) {
    if (all.size() == kMaxCgroups) break;
    std::optional<PeerCgroup> c = ReadPeerCgroup(entry);
    if (c.has_value() && c->id.Known()) all.push_back(*c);
  }
  return all;
}

// Exactly the limit's fields the peer reads back with ReadPeerCgroup.
nlohmann::json CgroupFields(const CgroupLimit& c) {
  nlohmann::json j = {{"room", c.Headroom()}};
  if (c.id.Known()) {
    j["dev"] = c.id.dev;
    j["ino"] = c.id.ino;
  }
  return j;
}

// The smaller known bound of a and b (a bytes of 0 is unknown); a on a tie.
MemoryBound Smaller(MemoryBound a, MemoryBound b) {
  if (a.bytes == 0 || (b.bytes != 0 && b.bytes < a.bytes)) return b;
  return a;
}

// A cgroup both ranks are under, by the smaller room either reads.
MemoryBound SharedCgroup(const CgroupLimit& mine, const PeerCgroup& peer, int peer_rank) {
  if (mine.Headroom() <= peer.room) {
    return {std::max<uint64_t>(mine.Headroom(), 1),
            fmt::format("{}, a cgroup both ranks are under ({})", mine.Describe(), mine.file)};
  }
  return {std::max<uint64_t>(peer.room, 1),
          fmt::format("the {:.2f} GiB free as rank {} reads the cgroup both ranks are under ({})",
                      GiB(peer.room), peer_rank, mine.file)};
}

}  // namespace

std::string BootId() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  in >> id;
  return id;
}

bool SameHost(const std::string& transport, const HostIdentity& mine, const HostIdentity& peer) {
  if (transport == "shm" || transport == "local") return true;
  if (!mine.boot_id.empty() && !peer.boot_id.empty()) return mine.boot_id == peer.boot_id;
  const bool named = !mine.hostname.empty() && mine.hostname != "unknown";
  return named && mine.hostname == peer.hostname;
}

nlohmann::json HostMemoryFields(const HostMemory& host) {
  nlohmann::json apart = nlohmann::json::object();
  if (host.mem_available != 0) apart["mem_available"] = host.mem_available;
  if (host.cgroup.has_value()) apart["cgroup"] = CgroupFields(*host.cgroup);
  nlohmann::json all = nlohmann::json::array();
  for (const CgroupLimit& c : host.limits) {
    if (c.id.Known() && all.size() < kMaxCgroups) all.push_back(CgroupFields(c));
  }
  apart["cgroups"] = std::move(all);
  return {{"mem_available", host.Bytes()},
          {"mem_bound", host.Describe()},
          {"host_memory", std::move(apart)}};
}

PeerHost ReadPeerHost(const nlohmann::json& theirs) {
  PeerHost p;
  p.boot_id = TypedField<std::string>(theirs, "boot_id").value_or("");
  auto host = theirs.is_object() ? theirs.find("host_memory") : theirs.end();
  if (host == theirs.end() || !host->is_object()) {
    p.mem_available = PeerBytes(theirs, "mem_available").value_or(0);
    return p;
  }
  p.apart = true;
  p.mem_available = PeerBytes(*host, "mem_available").value_or(0);
  auto tightest = host->find("cgroup");
  if (tightest != host->end()) p.cgroup = ReadPeerCgroup(*tightest);
  auto listed = host->find("cgroups");
  p.listed = listed != host->end();
  if (p.listed) p.cgroups = ReadPeerCgroups(*listed);
  return p;
}

MemoryBound SharedBound(const HostMemory& mine, const PeerHost& peer, int peer_rank) {
  if (!peer.apart) {
    return Smaller({mine.Bytes(), mine.Describe()},
                   {peer.mem_available,
                    fmt::format("rank {}'s host memory bound {:.2f} GiB (MemAvailable, or its "
                                "cgroup's room where smaller)",
                                peer_rank, GiB(peer.mem_available))});
  }
  MemoryBound b = Smaller({mine.mem_available, MemAvailableText(mine.mem_available)},
                          {peer.mem_available, fmt::format("rank {}'s {}", peer_rank,
                                                           MemAvailableText(peer.mem_available))});
  if (!peer.listed) {
    if (mine.cgroup.has_value() && peer.cgroup.has_value() &&
        mine.cgroup->id.SameAs(peer.cgroup->id)) {
      b = Smaller(b, SharedCgroup(*mine.cgroup, *peer.cgroup, peer_rank));
    }
    return b;
  }
  for (const CgroupLimit& c : mine.limits) {
    for (const PeerCgroup& theirs : peer.cgroups) {
      if (c.id.SameAs(theirs.id)) b = Smaller(b, SharedCgroup(c, theirs, peer_rank));
    }
  }
  return b;
}

kvlane::Status CheckSharedHostMemory(const HostPools& pools, bool same_host) {
  const uint64_t both = pools.target_bytes + pools.initiator_bytes;
  if (!same_host || pools.bound.bytes == 0) return kvlane::Status::Ok();
  if (both <= pools.bound.bytes / 10 * 9) return kvlane::Status::Ok();
  const std::string bound = pools.bound.description.empty() ? MemAvailableText(pools.bound.bytes)
                                                            : pools.bound.description;
  return kvlane::Status::InvalidArgument(fmt::format(
      "the two ranks' KV pools share this host's memory and do not fit together: rank 0 "
      "(target) {:.2f} GiB + rank 1 (initiator) {:.2f} GiB = {:.2f} GiB in host memory, more "
      "than 90% of {}; lower --pool-budget or the grid (--isl, --batches)",
      GiB(pools.target_bytes), GiB(pools.initiator_bytes), GiB(both), bound));
}

}  // namespace kvbench
