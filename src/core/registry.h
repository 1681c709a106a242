// Registry: this agent's registered memory, cut into pieces, and the live check
// every remote access goes through.
//
// Thread-safety: all methods are thread-safe. Remote accesses hold a shared lock
// for the duration of their copy, so Remove() returns only after accesses to the
// removed pieces have finished.
#pragma once

#include <atomic>
#include <cassert>
#include <cstdint>
#include <functional>
#include <mutex>
#include <shared_mutex>
#include <span>
#include <unordered_map>
#include <vector>

#include "core/piece.h"
#include "kvlane/memory.h"
#include "kvlane/status.h"

namespace kvlane::core {

// The registry's lock: a shared mutex that a waiting writer closes to the
// readers that come after it. std::shared_mutex (glibc) lets new readers in
// ahead of a waiting writer, so peers whose accesses overlap without a gap
// (each frame bounded, but begun before the one before it ended) kept
// DeregisterMemory out for as long as they went on. Not recursive: a thread
// that holds it shared must not take it shared again (a writer waiting in
// between would deadlock both). Thread-safety: a mutex.
class WriterFirstMutex {
 public:
  void lock() {
    gate_.lock();  // readers that come from now on wait here...
    mu_.lock();    // ...and those inside are waited for
  }
  void unlock() {
    mu_.unlock();
    gate_.unlock();
  }
  void lock_shared() {
    std::lock_guard gate(gate_);
    mu_.lock_shared();
  }
  void unlock_shared() { mu_.unlock_shared(); }
  // Whether anyone holds the lock now (a reader or a writer). A snapshot, for
  // tests: it takes and drops the lock when free.
  bool held() {
    if (!mu_.try_lock()) return true;
    mu_.unlock();
    return false;
  }

 private:
  std::mutex gate_;  // held by a writer from before its wait until it unlocks
  std::shared_mutex mu_;
};

class Registry {
 public:
  // REQUIRES: piece_bytes > 0. Any such value is safe here (AgentOptions bounds
  // it to 4 KiB..256 TiB): a region's pieces are counted, not stepped to its end.
  explicit Registry(uint64_t piece_bytes) : piece_bytes_(piece_bytes) { assert(piece_bytes > 0); }

  // REQUIRES: len > 0. Overlapping an existing registration is rejected, and so
  // is an `access` that is not a value of Access, and a region whose pieces
  // would bring the total past kMaxMetaPieces (what metadata carries).
  Result<RegionId> Add(uint64_t addr, uint64_t len, MemoryKind kind, int32_t device,
                       Access access = Access::kReadWrite);
  // Removes the region's pieces; returns their keys. Waits for remote accesses
  // in flight (they hold the shared lock).
  Result<std::vector<uint64_t>> Remove(RegionId id);

  // Copy of the live pieces, sorted by base.
  std::vector<Piece> Pieces() const;
  // Resolves a local range against the live pieces; appends to `out`.
  Status ResolveLocal(uint64_t addr, uint64_t len, MemoryKind kind,
                      std::vector<PieceRange>* out) const;

  using SharedLock = std::shared_lock<WriterFirstMutex>;
  // Remote side: hold the returned lock across LookupLocked() and the copy.
  // A DeregisterMemory waiting holds back later ones (WriterFirstMutex).
  SharedLock LockShared() const { return SharedLock(mu_); }
  // Blocks every remote access (and every lookup) until the lock is released.
  // Fault injection for tests: holds requests "in flight" deterministically.
  std::unique_lock<WriterFirstMutex> LockExclusive() const { return std::unique_lock(mu_); }
  // Whether a remote access (or a writer) holds the lock now. For tests that
  // must know a frame got inside before they go on.
  bool LockHeld() const { return mu_.held(); }
  // REQUIRES: LockShared() held. Returns the local pointer for a peer's `op`
  // (kWrite: the peer stores into the piece), kRemoteStale when the key is gone,
  // kNotAllowed when out of bounds or when `op` is kWrite and the piece is
  // read-only, and kRemoteDisconnect after Close(). `kind` (optional): the
  // piece's memory kind.
  Status LookupLocked(uint64_t key, uint64_t addr, uint64_t len, Op op, uint8_t** ptr,
                      MemoryKind* kind = nullptr) const;

  // Whether `key` names a live piece (false after Close()).
  bool HasKey(uint64_t key) const;
  // Whether every one of `keys` names a live piece (false after Close()).
  bool HasKeys(std::span<const uint64_t> keys) const;
  // For each of `keys`, in order, whether it names a live piece (all false
  // after Close()), under one shared lock.
  std::vector<bool> Live(std::span<const uint64_t> keys) const;
  // Regions removed so far; never decreases. A transfer looks its local pieces
  // up again (HasKeys) only when this moved since it last looked. Sequentially
  // consistent, with Remove's increment: Post marks itself in flight and then
  // reads this; DeregisterMemory removes and then looks for posts in flight.
  uint64_t removals() const { return removals_.load(std::memory_order_seq_cst); }
  // Changes to the table so far (regions added or removed); never decreases.
  // Moves after the change: a reader that reads it and then the pieces sees
  // at least the table of the count it read.
  uint64_t changes() const { return changes_.load(std::memory_order_acquire); }

  // Agent shutting down: every later remote access fails.
  void Close();
  // REQUIRES: LockShared() held. Whether Close() came (then it stays so).
  bool ClosedLocked() const { return closed_; }

  // Called by Remove() with the removed pieces, after they left the table and
  // before Remove() returns (transports whose peers touch memory without going
  // through LookupLocked revoke it here). Empty function: none.
  using RemoveHook = std::function<void(const std::vector<Piece>&)>;
  void SetRemoveHook(RemoveHook hook);

 private:
  const uint64_t piece_bytes_;
  mutable WriterFirstMutex mu_;
  std::vector<Piece> sorted_;                        // GUARDED_BY(mu_)
  std::unordered_map<uint64_t, Piece> by_key_;       // GUARDED_BY(mu_)
  uint64_t next_region_ = 1;                         // GUARDED_BY(mu_)
  bool closed_ = false;                              // GUARDED_BY(mu_)
  // Incremented after the pieces left the table (seq_cst: see removals()).
  std::atomic<uint64_t> removals_{0};
  std::atomic<uint64_t> changes_{0};                 // see changes()
  std::mutex hook_mu_;                               // held while the hook runs
  RemoveHook remove_hook_;                           // GUARDED_BY(hook_mu_)
};

}  // namespace kvlane::core
