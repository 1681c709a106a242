// Channel: the connection to one peer over one transport: its lanes (each a
// LaneQueue driven by the transport's threads), its error latch and its
// notification path. Transports subclass it.
//
// Thread-safety: Notify and Close are thread-safe; lane cursors belong to the
// transport's lane threads.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/completer.h"
#include "core/error_latch.h"
#include "core/lane_queue.h"
#include "core/piece.h"

namespace kvlane::core {

struct Request;

class Channel {
 public:
  Channel(int lanes, uint32_t ring_slots, Completer* completer);
  virtual ~Channel() = default;
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  virtual const char* transport() const = 0;
  // Delivers `bytes` to the peer's notification list. Blocking; thread-safe.
  virtual Status Notify(std::string_view bytes) = 0;
  // The peer's metadata was loaded again (LoadPeer): `pieces` is its new
  // region table, about to replace `current`. A transport that trusts the
  // table for access (cuda: the target cannot check a GPU's copies) confirms
  // what it must first; an error leaves the old table in place. Called under
  // PeerState::refresh_mu, not the peer's lock (lane threads may take it).
  virtual Status PeerTableChanged(const std::vector<Piece>& pieces,
                                  const std::vector<Piece>& current) {
    (void)pieces, (void)current;
    return Status::Ok();
  }
  // Stops the lane threads. Every item still queued retires with an error.
  // Called by the owner before destruction, and idempotent: an agent's Close
  // and then its peer's destruction both call it.
  virtual void Close() = 0;
  // Stops the lane threads and any progress running on a device (a resident
  // kernel) without freeing anything, so that no other channel's Close()
  // (whose frees may wait for every kernel on the device) waits for this
  // channel's. The owner calls it on every channel of an agent before the
  // first Close(); Close() implies it. Idempotent.
  virtual void StopLanes() {}
  // Whether the core should stripe bulk requests over this channel's lanes
  // (false when one lane already saturates the link, e.g. one GPU launch).
  virtual bool stripe_bulk() const { return true; }
  // Whether a post should queue one item for all its chunks (the transport
  // moves a request at once, e.g. one GPU launch per post).
  virtual bool whole_requests() const { return false; }
  // Called by a posting thread after it queued a whole post on `lane`: a
  // transport may issue it on that thread, in ticket order (bounded work, no
  // allocation, no waiting for the lane's threads).
  virtual void Kick(int lane) { (void)lane; }
  // Whether Kick wakes the lane's threads itself for whatever it leaves
  // queued: a post to one lane then queues without ringing (LaneQueue::Push).
  virtual bool kick_rings() const { return false; }
  // Called by a posting thread before it queues anything: a transport may
  // move the whole post `r` (its generation and records set, every chunk
  // pending) on `lane` at once, without a queue item, when nothing is queued
  // there ahead of it. True: it owns the post (its lane publishes or fails
  // it); false: nothing happened, queue it. Bounded work, no allocation, no
  // waiting for the lane's threads.
  virtual bool PostWhole(Request* r, int lane) {
    (void)r, (void)lane;
    return false;
  }

  int lane_count() const { return static_cast<int>(queues_.size()); }
  LaneQueue& queue(int lane) { return *queues_[lane]; }
  const LaneQueue& queue(int lane) const { return *queues_[lane]; }
  ErrorLatch& latch() { return latch_; }
  const std::atomic<bool>& closing() const { return closing_; }

 protected:
  // A lane is about to move chunk `w`. False: the request was canceled; the
  // lane must retire it without touching memory.
  static bool BeginChunk(const WorkItem& w);
  // Takes back a BeginChunk whose chunk then moved nothing and stays queued
  // (an inline send that found no room): Cancel may take it again.
  static void UnbeginChunk(const WorkItem& w);
  // Retires the oldest issued item of `lane` with status `s`.
  void RetireHead(int lane, const Status& s);
  // Retires the oldest issued item of `lane`, a whole post that a device
  // published itself (its record reads done), and returns it: the request is
  // left untouched. `bytes`: what the item carried, counted when it was issued.
  // The caller then lets go of it with SettleDirect, after its own bookkeeping
  // of the lane: from there on the owner may post it again or release it.
  WorkItem TakeDirect(int lane, uint64_t bytes);
  void SettleDirect(const WorkItem& w);
  // Whether a device may publish a post itself: the records are published as
  // each request finishes (independent policy), not in global order.
  bool direct_publication() const;
  // Issues and retires everything published on `lane` with `s` (no data moves).
  void DrainLane(int lane, const Status& s);
  // Retires a whole post a transport moved without a queue item (PostWhole):
  // FinishChunk for all of `w`'s chunks with `s`.
  void RetireWhole(const WorkItem& w, const Status& s) { completer_->FinishChunk(w, s); }
  // Sets closing and wakes every lane.
  void BeginClose();

 private:
  std::vector<std::unique_ptr<LaneQueue>> queues_;
  Completer* completer_;
  ErrorLatch latch_;
  std::atomic<bool> closing_{false};
};

// Bytes carried by the chunks of item `w`.
uint64_t ChunkBytes(const WorkItem& w);

}  // namespace kvlane::core
