// How many device-staging copiers (core/device_copier.h) a process holds at
// once. Each pins host memory (2 MiB in the cuda build), and the connections of
// authenticated peers make them on demand, so the count is capped in all and
// per peer name: one peer opening connection after connection cannot take
// every buffer from the other peers and from this process's own tcp lanes.
#pragma once

#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

#include "kvlane/status.h"

namespace kvlane::core {

// Copiers alive at once in a process: beyond it a staging thread's first
// device frame fails (kNotAllowed) instead of pinning more.
inline constexpr int kMaxStagingCopiers = 256;
// Copiers alive at once for the connections of one peer name: room for two of
// its channels at the largest lanes_per_peer (64 lane connections each, every
// one with a copier once it served a device frame), e.g. a restarted peer's
// while its old connections are still open. A peer name is what a handshake
// announced (docs/SECURITY.md): the cap shares the buffers out, it reserves none.
inline constexpr int kMaxStagingCopiersPerPeer = 128;

// Thread-safe. Outlives every Ticket it gave. REQUIRES: both caps > 0.
class StagingQuota {
 public:
  // A copier's place in the quota, given back when the ticket goes. Move-only;
  // one owner (not thread-safe itself).
  class Ticket {
   public:
    Ticket() = default;
    Ticket(Ticket&& o) noexcept : quota_(o.quota_), holder_(std::move(o.holder_)) {
      o.quota_ = nullptr;
    }
    Ticket& operator=(Ticket&& o) noexcept;
    Ticket(const Ticket&) = delete;
    Ticket& operator=(const Ticket&) = delete;
    ~Ticket() { Give(); }

   private:
    friend class StagingQuota;
    Ticket(StagingQuota* quota, std::string holder) : quota_(quota), holder_(std::move(holder)) {}
    void Give();
    StagingQuota* quota_ = nullptr;
    std::string holder_;
  };

  StagingQuota(int process_cap, int peer_cap) : process_cap_(process_cap), peer_cap_(peer_cap) {}

  // A place for a copier serving the connections of peer `holder`, or this
  // process's own lanes (`holder` empty: the process cap only). kNotAllowed
  // naming the cap reached.
  Result<Ticket> Take(const std::string& holder);
  // Places held now: in all, and by `holder` (tests and diagnostics).
  int alive() const;
  int alive(const std::string& holder) const;

 private:
  const int process_cap_;
  const int peer_cap_;
  mutable std::mutex mu_;
  int alive_ = 0;                                   // GUARDED_BY(mu_)
  std::unordered_map<std::string, int> by_holder_;  // GUARDED_BY(mu_); no zero counts
};

// This process's quota (kMaxStagingCopiers, kMaxStagingCopiersPerPeer), or
// the one a test installed.
StagingQuota& ProcessStagingQuota();

// Tests: makes ProcessStagingQuota() return `q` (nullptr: the process's own)
// for copiers made from now on. `q` must outlive every ticket it gives.
void SetStagingQuotaForTest(StagingQuota* q);

}  // namespace kvlane::core
