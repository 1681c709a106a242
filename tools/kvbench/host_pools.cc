#include "host_pools.h"

#include <fmt/format.h>

#include <fstream>

#include "json_field.h"

namespace kvbench {
namespace {

std::string MemAvailableText(uint64_t bytes) {
  return fmt::format("MemAvailable {:.2f} GiB", bytes / double(1 << 30));
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

PeerHost ReadPeerHost(const nlohmann::json& theirs) {
  const int64_t available = TypedField<int64_t>(theirs, "mem_available").value_or(0);
  return {TypedField<std::string>(theirs, "boot_id").value_or(""),
          available > 0 ? uint64_t(available) : 0,
          TypedField<std::string>(theirs, "mem_bound").value_or("")};
}

MemoryBound SmallerBound(uint64_t mine, const std::string& my_bound, const PeerHost& peer,
                         int peer_rank) {
  if (peer.mem_available == 0 || (mine != 0 && mine <= peer.mem_available)) {
    return {mine, my_bound};
  }
  const std::string theirs =
      peer.mem_bound.empty() ? MemAvailableText(peer.mem_available) : peer.mem_bound;
  return {peer.mem_available, fmt::format("rank {}'s {}", peer_rank, theirs)};
}

kvlane::Status CheckSharedHostMemory(const HostPools& pools, bool same_host) {
  const uint64_t both = pools.target_bytes + pools.initiator_bytes;
  if (!same_host || pools.mem_available == 0) return kvlane::Status::Ok();
  if (both <= pools.mem_available / 10 * 9) return kvlane::Status::Ok();
  auto gib = [](uint64_t b) { return b / double(1 << 30); };
  const std::string bound =
      pools.mem_bound.empty() ? MemAvailableText(pools.mem_available) : pools.mem_bound;
  return kvlane::Status::InvalidArgument(fmt::format(
      "the two ranks' KV pools share this host's memory and do not fit together: rank 0 "
      "(target) {:.2f} GiB + rank 1 (initiator) {:.2f} GiB = {:.2f} GiB in host memory, more "
      "than 90% of {}; lower --pool-budget or the grid (--isl, --batches)",
      gib(pools.target_bytes), gib(pools.initiator_bytes), gib(both), bound));
}

}  // namespace kvbench
