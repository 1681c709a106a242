// Request: the state of one transfer handle's slot. Built by MakeTransfer, reset
// by each Post, finished by the lanes, read by Check through `record`.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "kvlane/memory.h"
#include "kvlane/status.h"
#include "kvlane/transfer.h"

namespace kvlane::core {

class Channel;
struct PeerState;

// One contiguous pair: a local range and a remote range of equal length, each
// inside one piece.
struct Segment {
  uint64_t local_addr = 0;
  uint64_t remote_addr = 0;
  uint64_t remote_key = 0;
  uint64_t local_key = 0;
  uint64_t len = 0;
};

// Segments [seg_begin, seg_end) of a request move as one unit on one lane.
struct ChunkPlan {
  uint32_t seg_begin = 0;
  uint32_t seg_end = 0;
  uint64_t bytes = 0;
};

// The terminal record word: generation in the high 32 bits, status code in the
// low 32 bits (two's complement).
constexpr uint64_t PackRecord(uint32_t gen, Code code) {
  return (uint64_t{gen} << 32) | static_cast<uint32_t>(static_cast<int32_t>(code));
}
inline uint32_t RecordGen(uint64_t w) { return static_cast<uint32_t>(w >> 32); }
inline Code RecordCode(uint64_t w) { return static_cast<Code>(static_cast<int32_t>(w)); }

inline constexpr uint32_t kCanceledBit = 1u << 31;

struct alignas(64) Request {
  // `rec`: this slot's line of the agent's RecordTable.
  explicit Request(std::atomic<uint64_t>& rec) : record(rec) {}

  // Published with release after the transport let go of the memory; Check()
  // reads it with acquire. Written by the completer, or by a device (the cuda
  // transport) that publishes a post itself once its data is visible.
  std::atomic<uint64_t>& record;

  // Fixed between MakeTransfer and Release.
  uint32_t slot = 0;
  // Taken by MakeTransfer, freed by Release. Atomic (relaxed: the record's
  // generation orders the rest) because a stale copy of a handle may be used on
  // one thread while another thread takes the slot for a new transfer.
  std::atomic<bool> in_use{false};
  Op op = Op::kWrite;
  MemoryKind local_kind =
      MemoryKind::kHost;  // of the local list (a transport may stage device memory)
  std::shared_ptr<PeerState> peer;
  Channel* channel = nullptr;
  std::vector<Segment> segs;
  std::vector<ChunkPlan> chunks;
  // The local pieces segs touch, sorted, each once. Written under keys_mu (by
  // MakeTransfer and Release, on the owner's thread); DeregisterMemory reads it
  // under keys_mu from another thread, the owner without.
  mutable std::mutex keys_mu;
  std::vector<uint64_t> local_keys;
  bool UsesAnyOf(std::span<const uint64_t> sorted_keys) const {
    std::lock_guard lock(keys_mu);
    for (uint64_t k : sorted_keys)
      if (std::binary_search(local_keys.begin(), local_keys.end(), k)) return true;
    return false;
  }
  std::string notif;
  uint64_t total_bytes = 0;
  uint32_t pairs = 0;  // descriptor pairs MakeTransfer was given
  int fixed_lane = -1;
  bool stripe = true;
  // The lane this request's previous post went to (-1: none yet), which
  // PickLane prefers among the least loaded. Written by Post (and reset by
  // MakeTransfer when the slot is taken).
  int last_lane = -1;
  // Built by a transport on the first post (e.g. a segment table uploaded to a
  // GPU) and reused by later posts; dropped when the slot is released.
  std::shared_ptr<void> transport_state;
  // transport_state.get() once built, stored with release: a post on another
  // lane reads the state through this (acquire), since a record the device
  // wrote orders nothing on the host.
  std::atomic<void*> transport_ready{nullptr};
  // A post of this slot ended with an error while a device might still move
  // its data or write its record (a wedged GPU): Release does not reuse the
  // slot, DeregisterMemory of a region it uses fails (kBackend), and Check
  // reads the post's error even after the GPU wrote {gen, ok} over it.
  // Set before the error is published, and before the lane's last look at a
  // record the GPU writes; cleared if that look finds it landed (the post is
  // ok: CudaChannel::Poison, PoisonedOutcome).
  std::atomic<bool> poisoned{false};
  // Check's answer for a poisoned post whose record read {gen, ok}: kOk, the
  // post's error, or kNotFound once the slot was posted again. Waits out the
  // lane's decision (completer.cc).
  Code PoisonedOutcome(uint32_t gen) const;
  // DeregisterMemory's wait on this slot, for the regions whose piece keys are
  // `sorted_keys`: returns once its post no longer moves their data (it ended,
  // or never touched them), false; or true when a GPU that stopped answering
  // still may (the post stays poisoned): their memory must not be freed. A
  // lane between its poison and its decision is waited out, so a post that
  // stands as ok does not keep the region (completer.cc).
  bool AwaitOffRegions(std::span<const uint64_t> sorted_keys) const;

  // Per post.
  // The slot's claim (AgentImpl::ClaimSlot): true from the start of Post's look
  // for removed local regions until its record says in flight (or it refused),
  // which DeregisterMemory waits out; and while Release frees the slot. One
  // thread holds it at a time, so copies of a handle posted or released on two
  // threads at once are refused (kNotAllowed) instead of racing.
  std::atomic<bool> posting{false};
  uint32_t gen = 0;
  // Registry::removals() when local_keys were last found live (MakeTransfer,
  // then Post, which looks them up again only when a region was removed since).
  uint64_t local_removals = 0;
  uint64_t seq = 0;                  // global post order (global-fifo)
  std::atomic<int64_t> pending{0};   // chunks not retired, +1 while Post runs
  std::atomic<int32_t> error{0};     // first error code of this post
  std::atomic<uint32_t> ctl{0};      // chunks started by lanes | kCanceledBit
  // Written by whoever set `error`; read by Check on the error path. Guarded:
  // a caller may Check a copy of a handle while its owner posts it again, and
  // that post's error replaces the message under the reader (Check then finds
  // its generation gone and reads the handle as stale).
  mutable std::mutex error_mu;
  std::string error_message;  // GUARDED_BY(error_mu)
  std::string ErrorMessage() const {
    std::lock_guard lock(error_mu);
    return error_message;
  }
  std::atomic<bool> done_unpublished{false};  // global-fifo: finished, waiting for order
  // The generation of the last post the lanes have let go of: equal to the
  // record's generation except for a moment after a device published a post
  // itself, while its lane's retire thread still holds the request (only to
  // retire its queue slot). Release waits for it (AgentImpl::AwaitSettled);
  // Post need not: that lane touches nothing of the request a post writes.
  // Never decreases (Completer::Settle).
  // A line of its own: the retire thread writes it as a device-published post
  // finishes, while the owner may already be writing the fields above for its
  // next post (no speed measured either way, session 9).
  alignas(64) std::atomic<uint32_t> settled{0};

  // Records the first error of this post.
  void SetError(const Status& s);
};

}  // namespace kvlane::core
