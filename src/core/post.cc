// The hot path: posting prepared transfers, and reading their terminal records.
#include <thread>

#include "core/agent_impl.h"
#include "core/hop_trace.h"
#include "core/lane_pick.h"

namespace kvlane::core {

namespace {
constexpr const char* kSlotClaimed =
    "another thread is posting or releasing this transfer (a handle is used by one thread at "
    "a time)";

// Why the record `w` refuses a post of a handle at generation `gen`: stale, or
// its previous post still in flight; Ok when neither.
Status RecordRefusal(uint64_t w, uint32_t gen) {
  if (RecordGen(w) != gen) return Status::NotFound("stale transfer handle");
  if (RecordCode(w) == Code::kInProgress) return Status::NotAllowed("transfer is still in flight");
  return Status::Ok();
}
}  // namespace

Result<Request*> AgentImpl::SlotOf(const XferHandle& h) const {
  if (h.slot >= slots_.size()) return Status::InvalidArgument("invalid transfer handle");
  return slots_[h.slot].get();
}

Result<uint32_t> AgentImpl::ChunksStarted(const XferHandle& h) const {
  KVLANE_ASSIGN_OR_RETURN(Request * r, SlotOf(h));
  return r->ctl.load(std::memory_order_acquire) & ~kCanceledBit;
}

bool AgentImpl::Striped(const Request& r) const {
  return r.fixed_lane < 0 && r.stripe && r.channel->stripe_bulk() &&
         r.total_bytes >= ctx_.options.stripe_min_bytes;
}

int AgentImpl::PickLane(const Request& r, uint32_t chunk, uint32_t rotation) const {
  const int n = r.channel->lane_count();
  if (r.fixed_lane >= 0) return r.fixed_lane;  // below n (MakeTransfer)
  if (Striped(r)) return static_cast<int>((rotation + chunk) % n);
  // Small request (or a channel that does not stripe): see LeastLoadedLane.
  // Chosen once per post (chunk 0) and kept for its chunks.
  return LeastLoadedLane(n, rotation, r.last_lane,
                         [&](int i) { return r.channel->queue(i).queued_bytes(); });
}

Status AgentImpl::Post(XferHandle* h) {
  KVLANE_ASSIGN_OR_RETURN(Request * r, SlotOf(*h));
  uint64_t w = r->record.load(std::memory_order_acquire);
  if (!r->in_use.load(std::memory_order_relaxed)) return Status::NotFound("stale transfer handle");
  KVLANE_RETURN_IF_ERROR(RecordRefusal(w, h->gen));
  // The slot's claim (Request::posting), then the record once more, and only
  // then the slot's channel: a copy of this handle posted or released on another
  // thread meanwhile is refused here instead of resetting or freeing the post
  // under this one (Release frees the slot under the claim). The first look
  // above keeps a stale copy from taking the claim from the slot's next owner.
  // The exchange is sequentially consistent: DeregisterMemory's pairing below.
  if (!ClaimSlot(*r)) return Status::NotAllowed(kSlotClaimed);
  Status refused = RecordRefusal(r->record.load(std::memory_order_acquire), h->gen);
  Channel* ch = refused.ok() ? r->channel : nullptr;  // the slot is still this handle's
  if (refused.ok()) refused = ch->latch().Get();      // latched: reject, handle unchanged
  if (refused.ok() && ch->closing().load(std::memory_order_acquire))
    refused = Status::Canceled("agent is shutting down");
  if (!refused.ok()) {
    r->posting.store(false, std::memory_order_release);
    return refused;
  }
  // No wait for Request::settled: a record reads terminal only once the lanes
  // are done with the request's fields (the host publishes after the last
  // retire), or, when a device published it, once the data moved; that lane
  // then only retires its own queue slot and settles (Channel::TakeDirect).

  // Posting from here, then a look for removed regions: both sequentially
  // consistent, as are DeregisterMemory's removal and then its look for posts
  // posting or in flight, so that either this post sees the removal or
  // DeregisterMemory sees this post (and waits for it). One load unless a region
  // was removed since the local pieces were last found live; then they are
  // looked up again. A refused post never touched the record.
  const uint64_t removals = ctx_.registry->removals();
  if (removals != r->local_removals) {
    Status live = CheckLocalKeys(*r);
    if (!live.ok()) {
      r->posting.store(false, std::memory_order_release);
      return live;  // handle unchanged
    }
    r->local_removals = removals;
  }
  const uint32_t nchunks = static_cast<uint32_t>(r->chunks.size());
  r->gen = h->gen + 1;
  r->error.store(0, std::memory_order_relaxed);
  r->ctl.store(0, std::memory_order_relaxed);
  r->pending.store(int64_t{nchunks} + 1, std::memory_order_relaxed);
  r->record.store(PackRecord(r->gen, Code::kInProgress), std::memory_order_release);
  // Release, after the record: a DeregisterMemory that reads it false reads the
  // record in flight.
  r->posting.store(false, std::memory_order_release);
  h->gen = r->gen;
  completer_.OnPost(r);

  // A load and a store, not a locked read-modify-write (no speed measured
  // either way, session 9): posts racing on other threads may take the same
  // value; the rotation only spreads the load.
  const uint32_t rotation = rotation_.load(std::memory_order_relaxed);
  rotation_.store(rotation + 1, std::memory_order_relaxed);
  int lane = PickLane(*r, 0, rotation);
  r->last_lane = lane;
  if (ch->whole_requests() && ch->PostWhole(r, lane)) {
    completer_.DropPending(r, 1);  // Post's own reference; the lane holds the chunks'
    return Status::InProgress();
  }
  const auto deadline = std::chrono::steady_clock::now() + ctx_.options.post_timeout;  // queueing's
  uint32_t launched = 0;
  Status failure;
  const uint32_t per_item = ch->whole_requests() ? nchunks : 1;
  // One lane and a Kick that rings for what it leaves: no wake-up of a
  // sleeping lane thread for a post the Kick sends itself.
  const bool quiet = ch->kick_rings() && !Striped(*r);
  while (launched < nchunks) {
    if (launched > 0 && Striped(*r)) lane = PickLane(*r, launched, rotation);
    LaneQueue& q = ch->queue(lane);
    const WorkItem item{r, launched, r->gen, per_item};
    const uint64_t bytes = ChunkBytes(item);
    q.AddBytes(bytes);
    failure = q.Push(item, deadline, ch->closing(), /*ring=*/!quiet);
    if (!failure.ok()) {
      q.TakeBytes(bytes);
      r->SetError(failure);
      break;
    }
    launched += per_item;
  }
  KVLANE_HOP(kHopQueued);
  if (launched == nchunks) {
    ch->Kick(lane);  // before the drop: the issue starts sooner
  } else if (quiet && launched > 0) {
    ch->queue(lane).Ring();  // no Kick: the lane's thread sends what was queued
  }
  completer_.DropPending(r, int64_t{nchunks - launched} + 1);
  if (launched == nchunks) return Status::InProgress();
  // Failed half way: report only after the launched chunks have drained.
  completer_.WaitPublished(r->record, r->gen, std::chrono::steady_clock::time_point::max());
  return failure;
}

bool AgentImpl::PostMayWait(const XferHandle& h) const {
  if (h.slot >= slots_.size()) return false;
  const Request& r = *slots_[h.slot];
  // The plan is fixed from MakeTransfer to Release; the generation tells this
  // slot's transfer from a stale handle (as in Describe).
  if (RecordGen(r.record.load(std::memory_order_acquire)) != h.gen ||
      !r.in_use.load(std::memory_order_relaxed))
    return false;
  // Post looks the local regions up again, under the registry's shared lock,
  // which a DeregisterMemory waiting on a peer's access may hold up.
  if (ctx_.registry->removals() != r.local_removals) return true;
  const Channel& ch = *r.channel;
  const int lanes = ch.lane_count();
  const uint32_t chunks = static_cast<uint32_t>(r.chunks.size());
  // Queue items a lane takes: a whole request is one (Post); a striped one
  // spreads its chunks over every lane; otherwise all on the lane Post picks.
  uint32_t items = chunks;
  if (ch.whole_requests()) {
    items = 1;
  } else if (Striped(r)) {
    items = (chunks + lanes - 1) / lanes;
  }
  for (int i = 0; i < lanes; ++i) {
    if (r.fixed_lane >= 0 && i != r.fixed_lane) continue;
    if (!ch.queue(i).HasRoom(items)) return true;
  }
  return false;
}

// A device may publish a post itself (Request::settled): the lane that moved
// it lets go a moment later. Release waits for that before the slot is reused.
// Spins, then yields; kTimeout at the deadline.
Status AgentImpl::AwaitSettled(const Request& r, uint32_t gen, std::chrono::steady_clock::time_point deadline) {
  for (uint32_t n = 0; r.settled.load(std::memory_order_acquire) != gen; ++n) {
    if (n < 1024) continue;
    if (std::chrono::steady_clock::now() > deadline)
      return Status::Timeout("the previous post of this transfer is still held by its lane");
    std::this_thread::yield();
  }
  return Status::Ok();
}

Status AgentImpl::CheckLocalKeys(const Request& r) const {
  if (ctx_.registry->HasKeys(r.local_keys)) return Status::Ok();
  return Status::InvalidArgument(
      "a local region of this transfer was deregistered: make the transfer again from a list "
      "prepared on registered memory");
}

Status AgentImpl::Check(const XferHandle& h) const {
  if (h.slot >= slots_.size()) return Status::InvalidArgument("invalid transfer handle");
  const Request* r = slots_[h.slot].get();
  // Acquire pairs with the release store in Completer::Publish.
  uint64_t w = r->record.load(std::memory_order_acquire);
  if (RecordGen(w) != h.gen) return Status::NotFound("stale transfer handle");
  Code c = RecordCode(w);
  if (c == Code::kOk) {
    if (!r->poisoned.load(std::memory_order_acquire)) [[likely]]
      return Status::Ok();
    c = r->PoisonedOutcome(h.gen);
    if (c == Code::kOk) return Status::Ok();
  }
  if (c == Code::kInProgress) return Status::InProgress();
  std::string message = r->ErrorMessage();
  // A post of the same slot since the load (the owner re-posting, this being a
  // copy of its handle) may have replaced the message: then this handle is stale.
  if (RecordGen(r->record.load(std::memory_order_acquire)) != h.gen)
    return Status::NotFound("stale transfer handle");
  return Status(c, std::move(message));
}

Result<XferInfo> AgentImpl::Describe(const XferHandle& h) const {
  if (h.slot >= slots_.size()) return Status::InvalidArgument("invalid transfer handle");
  const Request* r = slots_[h.slot].get();
  // The plan is fixed from MakeTransfer to Release; the generation (acquire,
  // pairs with MakeTransfer's release) tells this slot's current transfer from
  // a stale handle before anything else of the slot is read.
  if (RecordGen(r->record.load(std::memory_order_acquire)) != h.gen ||
      !r->in_use.load(std::memory_order_relaxed))
    return Status::NotFound("stale transfer handle");
  return XferInfo{r->total_bytes, r->pairs, static_cast<uint32_t>(r->segs.size()),
                  static_cast<uint32_t>(r->chunks.size())};
}

Status AgentImpl::Wait(const XferHandle& h, std::chrono::nanoseconds timeout) const {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  // Saturated: nanoseconds::max() ("forever") must not wrap into the past.
  const auto deadline = timeout >= Clock::time_point::max() - start ? Clock::time_point::max() : start + timeout;
  const auto spin_until = start + ctx_.options.spin;
  for (;;) {
    Status s = Check(h);
    if (!s.in_progress()) return s;
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return Status::Timeout("transfer still in flight after the wait timeout");
    if (now >= spin_until) {
      const_cast<Completer&>(completer_).WaitPublished(slots_[h.slot]->record, h.gen, deadline);
    }
  }
}

Status AgentImpl::Cancel(const XferHandle& h) {
  KVLANE_ASSIGN_OR_RETURN(Request * r, SlotOf(h));
  uint64_t w = r->record.load(std::memory_order_acquire);
  if (!r->in_use.load(std::memory_order_relaxed) || RecordGen(w) != h.gen)
    return Status::NotFound("stale transfer handle");
  if (RecordCode(w) != Code::kInProgress) return Status::Ok();  // finished: nothing to do
  uint32_t v = r->ctl.load(std::memory_order_acquire);
  for (;;) {
    if (v & kCanceledBit) return Status::Ok();
    if (v != 0) return Status::NotAllowed("a lane owns part of the transfer; wait for it");
    // acq_rel pairs with the lanes' fetch_add in Channel::BeginChunk.
    if (r->ctl.compare_exchange_weak(v, kCanceledBit, std::memory_order_acq_rel)) break;
  }
  // The lanes record kCanceled as they skip each chunk (they hold the pending
  // references; writing the error here could race with the publication).
  return Status::Ok();
}

Status AgentImpl::Release(XferHandle* h) {
  KVLANE_ASSIGN_OR_RETURN(Request * r, SlotOf(*h));
  uint64_t w = r->record.load(std::memory_order_acquire);
  if (!r->in_use.load(std::memory_order_relaxed) || RecordGen(w) != h->gen)
    return Status::NotFound("stale transfer handle");
  if (RecordCode(w) == Code::kInProgress) {
    KVLANE_RETURN_IF_ERROR(Cancel(*h));
    // Canceled chunks are skipped by the lanes without touching memory.
    completer_.WaitPublished(r->record, h->gen, std::chrono::steady_clock::time_point::max());
  }
  KVLANE_RETURN_IF_ERROR(AwaitSettled(*r, h->gen, std::chrono::steady_clock::now() + ctx_.options.io_timeout));
  // As in Post: a copy posted again meanwhile keeps its slot (FreeSlot lets the
  // claim go).
  if (!ClaimSlot(*r)) return Status::NotAllowed(kSlotClaimed);
  w = r->record.load(std::memory_order_acquire);
  if (RecordGen(w) != h->gen || RecordCode(w) == Code::kInProgress) {
    r->posting.store(false, std::memory_order_release);
    return Status::NotFound("stale transfer handle (posted again meanwhile)");
  }
  FreeSlot(r);
  *h = XferHandle{};
  return Status::Ok();
}

bool AgentImpl::ClaimSlot(Request& r) {
  return !r.posting.exchange(true, std::memory_order_seq_cst);
}

void AgentImpl::FreeSlot(Request* r) {
  uint32_t gen = RecordGen(r->record.load(std::memory_order_relaxed)) + 1;
  r->record.store(PackRecord(gen, Code::kNotFound), std::memory_order_release);  // stale for all
  r->in_use.store(false, std::memory_order_relaxed);
  // The last reference to a removed peer closes its channels (joins their
  // threads): that happens when this returns, after the claim is let go, which
  // a DeregisterMemory meanwhile waits for.
  const std::shared_ptr<PeerState> peer = std::move(r->peer);
  r->channel = nullptr;
  r->segs.clear();
  r->chunks.clear();
  r->notif.clear();
  // Poisoned: a wedged device may still read its state, move its data and write
  // its record, so its state and local_keys (for DeregisterMemory) stay and the
  // slot is never reused (a bounded leak per wedge).
  // The claim goes before the slot can be made anew: a new owner's first Post
  // must not find it taken.
  if (r->poisoned.load(std::memory_order_acquire)) {
    r->posting.store(false, std::memory_order_release);
    return;
  }
  {
    std::lock_guard lock(r->keys_mu);
    r->local_keys.clear();
  }
  r->transport_state.reset();
  r->transport_ready.store(nullptr, std::memory_order_relaxed);
  r->posting.store(false, std::memory_order_release);
  std::lock_guard lock(free_mu_);
  free_slots_.push_back(r->slot);
}

}  // namespace kvlane::core
