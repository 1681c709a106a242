// PeerConnLimit: how many connections each authenticated peer holds at once on
// one agent (AgentOptions::max_conns_per_peer), counted over all its servers
// together (tcp, shm, the cuda control socket share the one in AgentContext),
// so that one peer cannot take all of a server's ConnSet::kMaxConns
// connections, and threads, and lock every other peer out. A peer is known by
// the name its Hello announced (handshake.h): the proof covers it, but every
// holder of the agent's metadata may announce any name, so this binds a peer
// that keeps its name (a runaway or buggy initiator, or one restarted while its
// old connections linger), not a hostile blob holder, who may take a new name
// per connection.
//
// Thread-safety: thread-safe. A Slot is released by its destructor, on any
// thread; it must not outlive its PeerConnLimit.
#pragma once

#include <cassert>
#include <cstdint>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>
#include <utility>

#include "kvlane/status.h"

namespace kvlane::core {

class PeerConnLimit {
 public:
  // One connection counted against its peer until destroyed (or moved from).
  class Slot {
   public:
    Slot(Slot&& o) noexcept : owner_(std::exchange(o.owner_, nullptr)), peer_(std::move(o.peer_)) {}
    Slot& operator=(Slot&& o) noexcept {
      if (this != &o) {
        Release();
        owner_ = std::exchange(o.owner_, nullptr);
        peer_ = std::move(o.peer_);
      }
      return *this;
    }
    ~Slot() { Release(); }

    const std::string& peer() const { return peer_; }

   private:
    friend class PeerConnLimit;
    Slot(PeerConnLimit* owner, std::string peer) : owner_(owner), peer_(std::move(peer)) {}
    void Release() {
      if (owner_ != nullptr) std::exchange(owner_, nullptr)->Release(peer_);
    }

    PeerConnLimit* owner_ = nullptr;
    std::string peer_;
  };

  // REQUIRES: max_per_peer >= 1.
  explicit PeerConnLimit(uint32_t max_per_peer) : max_(max_per_peer) { assert(max_ >= 1); }
  PeerConnLimit(const PeerConnLimit&) = delete;
  PeerConnLimit& operator=(const PeerConnLimit&) = delete;
  ~PeerConnLimit() { assert(held_.empty()); }  // every Slot is gone

  // A slot for one more connection of `peer`; NotAllowed, naming the limit, when
  // `peer` holds max_per_peer already; Backend when memory runs out (nothing is
  // counted then). Never throws.
  Result<Slot> Acquire(const std::string& peer) noexcept {
    try {
      return TryAcquire(peer);
    } catch (const std::bad_alloc&) {
      return Status::Backend("out of memory");  // short: fits the string's own buffer
    }
  }

 private:
  // Acquire, but may throw std::bad_alloc: every allocation comes before the
  // count, so a throw leaves none taken.
  Result<Slot> TryAcquire(const std::string& peer) {
    Slot slot(nullptr, peer);  // counts nothing until it has an owner
    std::lock_guard lock(mu_);
    uint32_t& n = held_.try_emplace(peer, 0).first->second;  // a new node holds 0 until below
    if (n >= max_)
      return Status::NotAllowed("peer '" + peer + "' already holds " + std::to_string(n) +
                                " connections (AgentOptions.max_conns_per_peer)");
    ++n;  // nothing below allocates or throws
    slot.owner_ = this;
    return slot;
  }
  void Release(const std::string& peer) {
    std::lock_guard lock(mu_);
    auto it = held_.find(peer);
    assert(it != held_.end() && it->second > 0);
    if (--it->second == 0) held_.erase(it);  // the map holds peers with connections only
  }

  const uint32_t max_;
  std::mutex mu_;
  std::unordered_map<std::string, uint32_t> held_;  // GUARDED_BY(mu_); every value > 0
};

}  // namespace kvlane::core
