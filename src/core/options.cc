#include "kvlane/options.h"

#include <algorithm>
#include <string>
#include <utility>

#include "core/plain_text.h"
#include "transport/notif_queue.h"

namespace kvlane {
namespace {

bool IsPowerOfTwo(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

constexpr StagingCopy kStagingCopies[] = {StagingCopy::kBatch, StagingCopy::kEach,
                                          StagingCopy::kKernel};

Status Bad(const std::string& field, const std::string& why) {
  return Status::InvalidArgument("AgentOptions." + field + " " + why);
}

// The timeouts and spin are bounded so that no sum the engine forms from them
// overflows: a deadline (steady_clock::now() + t, in nanoseconds), the tcp user
// timeout (2 x io_timeout + 1 s), the cuda descriptor exchange's deadline
// (connect_timeout + 4 x io_timeout), and poll's int milliseconds (io_timeout,
// connect_timeout: 24 h is 86,400,000 ms; an int holds 24.8 days).
Status CheckDurations(const AgentOptions& o) {
  const std::pair<const char*, std::chrono::milliseconds> timeouts[] = {
      {"post_timeout", o.post_timeout},
      {"connect_timeout", o.connect_timeout},
      {"io_timeout", o.io_timeout}};
  for (const auto& [field, value] : timeouts) {
    if (value.count() <= 0 || value > AgentOptions::kMaxTimeout)
      return Bad(field, "must be 1 ms..24 h, got " + std::to_string(value.count()) + " ms");
  }
  if (o.spin.count() < 0 || o.spin > AgentOptions::kMaxSpin)
    return Bad("spin", "must be 0..1 s, got " + std::to_string(o.spin.count()) + " us");
  return Status::Ok();
}

}  // namespace

const char* PolicyName(ProgressPolicy policy) {
  return policy == ProgressPolicy::kGlobalFifo ? "global-fifo" : "independent";
}

Result<ProgressPolicy> ParsePolicy(const std::string& name) {
  if (name == "independent") return ProgressPolicy::kIndependent;
  if (name == "global-fifo") return ProgressPolicy::kGlobalFifo;
  return Status::InvalidArgument("unknown progress policy '" + name +
                                 "' (expected independent or global-fifo)");
}

const char* StagingCopyName(StagingCopy copy) {
  switch (copy) {
    case StagingCopy::kEach:
      return "each";
    case StagingCopy::kKernel:
      return "kernel";
    case StagingCopy::kBatch:
      break;
  }
  return "batch";
}

Result<StagingCopy> ParseStagingCopy(const std::string& name) {
  for (StagingCopy c : kStagingCopies)
    if (name == StagingCopyName(c)) return c;
  return Status::InvalidArgument("unknown staging copy '" + name +
                                 "' (expected batch, each or kernel)");
}

Status AgentOptions::Validate() const {
  KVLANE_RETURN_IF_ERROR(core::CheckAgentName(name, "AgentOptions.name"));
  if (policy != ProgressPolicy::kIndependent && policy != ProgressPolicy::kGlobalFifo)
    return Bad("policy", "must be kIndependent or kGlobalFifo");
  static const char* kKnown[] = {"local", "shm", "tcp", "cuda"};
  if (transports.empty()) return Bad("transports", "names none");
  for (size_t i = 0; i < transports.size(); ++i) {
    const std::string& t = transports[i];
    if (std::find(std::begin(kKnown), std::end(kKnown), t) == std::end(kKnown))
      return Bad("transports", "names unknown transport '" + t + "'");
    if (std::find(transports.begin(), transports.begin() + i, t) != transports.begin() + i)
      return Bad("transports", "names '" + t + "' twice");
  }
  if (lanes_per_peer < 1 || lanes_per_peer > 64) return Bad("lanes_per_peer", "must be 1..64");
  if (chunk_bytes < 4096 || chunk_bytes > (1ull << 30)) return Bad("chunk_bytes", "must be 4 KiB..1 GiB");
  if (max_segments_per_chunk < 1 || max_segments_per_chunk > 1024)
    return Bad("max_segments_per_chunk", "must be 1..1024");
  if (!IsPowerOfTwo(lane_ring_slots) || lane_ring_slots < 2 || lane_ring_slots > (1u << 24))
    return Bad("lane_ring_slots", "must be a power of two, 2..16M");
  if (max_requests < 1 || max_requests > (1u << 24)) return Bad("max_requests", "must be 1..16M");
  if (piece_bytes < 4096 || piece_bytes > kMaxPieceBytes)
    return Bad("piece_bytes", "must be 4 KiB..256 TiB (2^48), got " + std::to_string(piece_bytes));
  KVLANE_RETURN_IF_ERROR(CheckDurations(*this));
  if (tcp_keepalive.count() < 0 || tcp_keepalive.count() > 32767)
    return Bad("tcp_keepalive", "must be 0 (off) or 1..32767 s, got " +
                                    std::to_string(tcp_keepalive.count()) + " s");
  if (post_inline_bytes > (1ull << 20)) return Bad("post_inline_bytes", "must be at most 1 MiB");
  for (size_t i = 0; i < worker_cpus.size(); ++i) {
    if (worker_cpus[i] < 0 || worker_cpus[i] > 1023)
      return Bad("worker_cpus", "must name CPUs 0..1023");
    if (std::find(worker_cpus.begin(), worker_cpus.begin() + i, worker_cpus[i]) !=
        worker_cpus.begin() + i)
      return Bad("worker_cpus", "names CPU " + std::to_string(worker_cpus[i]) + " twice");
  }
  if (max_notification_bytes < 4096 || max_notification_bytes > (16ull << 30))
    return Bad("max_notification_bytes", "must be 4 KiB..16 GiB");
  // Below 202 bytes no notification fits (each costs its payload, name and 72, and
  // the first of a name another 128 and the name).
  static_assert(core::NotifQueue::kSmallestCost == 202);  // the message says 202
  if (max_notification_bytes_per_peer > max_notification_bytes ||
      (max_notification_bytes_per_peer != 0 &&
       max_notification_bytes_per_peer < core::NotifQueue::kSmallestCost))
    return Bad("max_notification_bytes_per_peer", "must be 202..max_notification_bytes (" +
                                                      std::to_string(max_notification_bytes) +
                                                      "), or 0 for a quarter of it");
  if (max_conns_per_peer < 1 || max_conns_per_peer > 4096)
    return Bad("max_conns_per_peer", "must be 1..4096");
  if (std::find(std::begin(kStagingCopies), std::end(kStagingCopies), staging_copy) ==
      std::end(kStagingCopies))
    return Bad("staging_copy", "must be kBatch, kEach or kKernel");
  if (cuda_proxy_blocks < 0 || cuda_proxy_blocks > 8) return Bad("cuda_proxy_blocks", "must be 0..8");
  if (cuda_proxy_max_bytes > (16ull << 20)) return Bad("cuda_proxy_max_bytes", "must be at most 16 MiB");
  if (cuda_proxy_idle_exit.count() < 0 || cuda_proxy_idle_exit > std::chrono::seconds(1))
    return Bad("cuda_proxy_idle_exit", "must be 0..1 s");
  if (cuda_proxy_renew_every.count() != 0 &&
      (cuda_proxy_renew_every < std::chrono::microseconds(100) || cuda_proxy_renew_every > std::chrono::seconds(1)))
    return Bad("cuda_proxy_renew_every", "must be 0 (off) or 100 us..1 s");
  return Status::Ok();
}

}  // namespace kvlane
