// Preparing descriptor lists and building transfers from them: every lookup
// happens here, once, so that Post() only enqueues.
#include <algorithm>

#include "core/agent_impl.h"
#include "core/hex.h"
#include "core/segment_merge.h"

namespace kvlane::core {
namespace {

constexpr size_t kMaxNotif = 64u << 10;

std::string DescError(size_t i, const Status& s) {
  return "descriptor " + std::to_string(i) + ": " + s.message();
}

// NotAllowed when `op` would store into a read-only piece of remote descriptor `i`.
Status CheckRemoteAccess(Op op, const std::vector<PieceRange>& ranges, uint32_t i) {
  for (const PieceRange& pr : ranges) {
    if (op == Op::kWrite && pr.piece.access == Access::kReadOnly)
      return CheckAccess(pr.piece.access, op, "remote descriptor " + std::to_string(i));
  }
  return Status::Ok();
}

}  // namespace

void AppendSegment(Request* r, const Segment& s, const Piece& lp, const Piece& rp, uint64_t max_seg,
                   bool merge) {
  if (merge && !r->segs.empty()) {
    Segment& last = r->segs.back();
    if (last.local_key == s.local_key && last.remote_key == s.remote_key &&
        last.local_addr + last.len == s.local_addr &&
        last.remote_addr + last.len == s.remote_addr && last.len < max_seg &&
        Contains(lp, last.local_addr, last.len + s.len) &&
        Contains(rp, last.remote_addr, last.len + s.len)) {
      const uint64_t add = std::min(s.len, max_seg - last.len);
      last.len += add;
      if (add == s.len) return;
      r->segs.push_back(
          {s.local_addr + add, s.remote_addr + add, s.remote_key, s.local_key, s.len - add});
      return;
    }
  }
  r->segs.push_back(s);
}

Result<PreparedId> AgentImpl::PrepareLocal(const DescList& list) {
  auto p = std::make_shared<PreparedList>();
  p->kind = list.kind;
  p->descs.resize(list.descs.size());
  for (size_t i = 0; i < list.descs.size(); ++i) {
    const Desc& d = list.descs[i];
    Status s = ctx_.registry->ResolveLocal(d.addr, d.len, list.kind, &p->descs[i]);
    if (!s.ok()) return Status(s.code(), "local " + DescError(i, s));
    p->lens.push_back(d.len);
  }
  return AddPrepared(std::move(p));
}

Result<PreparedId> AgentImpl::PrepareRemote(std::string_view peer_name, const DescList& list) {
  auto peer = FindPeer(peer_name);
  if (!peer) return Status::NotFound("unknown peer '" + std::string(peer_name) + "'");
  auto p = std::make_shared<PreparedList>();
  p->remote = true;
  p->kind = list.kind;
  p->peer = peer;
  p->descs.resize(list.descs.size());
  std::lock_guard plock(peer->mu);
  for (size_t i = 0; i < list.descs.size(); ++i) {
    const Desc& d = list.descs[i];
    Status s = ResolveRange(peer->meta.pieces, d.addr, d.len, list.kind, &p->descs[i]);
    if (!s.ok()) return Status(s.code(), "remote " + DescError(i, s));
    p->lens.push_back(d.len);
  }
  return AddPrepared(std::move(p));
}

PreparedId AgentImpl::AddPrepared(std::shared_ptr<PreparedList> p) {
  std::lock_guard lock(prepared_mu_);
  uint32_t id = next_prepared_++;
  while (id == 0 || prepared_.count(id) != 0) id = next_prepared_++;  // after a wrap
  prepared_[id] = std::move(p);
  return PreparedId{id};
}

Status AgentImpl::ReleasePrepared(PreparedId id) {
  // A list of a removed peer may hold its last reference: destroyed (its
  // channels closed) after prepared_mu_ is let go, which every Prepare and
  // MakeTransfer takes.
  std::shared_ptr<PreparedList> gone;
  std::unique_lock lock(prepared_mu_);
  auto it = prepared_.find(id.value);
  if (it == prepared_.end()) return Status::NotFound("unknown prepared list");
  gone = std::move(it->second);
  prepared_.erase(it);
  lock.unlock();
  return Status::Ok();  // transfers made from it keep their own resolved copy
}

Result<std::shared_ptr<PreparedList>> AgentImpl::GetPrepared(PreparedId id) const {
  std::lock_guard lock(prepared_mu_);
  auto it = prepared_.find(id.value);
  if (it == prepared_.end()) return Status::NotFound("unknown prepared list " + std::to_string(id.value));
  return it->second;
}

// The pairs of a transfer, checked before any channel is opened for it: as many
// local as remote descriptors, at least one, every index in range, each pair's
// two lengths equal, no WRITE into a read-only remote piece, and no two pairs
// writing the same byte (a WRITE naming a remote descriptor twice, a READ whose
// local descriptors overlap would leave whichever copy landed last). The
// overlap check is one pass when the destinations ascend (the usual list), else
// sorted.
Status AgentImpl::CheckPairs(Op op, const PreparedList& local, std::span<const uint32_t> li,
                             const PreparedList& remote, std::span<const uint32_t> ri) {
  size_t n = li.empty() ? local.descs.size() : li.size();
  size_t m = ri.empty() ? remote.descs.size() : ri.size();
  if (n != m) return Status::InvalidArgument("local and remote lists differ in length (" +
                                             std::to_string(n) + " vs " + std::to_string(m) + ")");
  if (n == 0) return Status::InvalidArgument("empty transfer");
  const bool remote_dst = op == Op::kWrite;
  auto dst_of = [&](size_t i) -> const std::vector<PieceRange>& {
    return remote_dst ? remote.descs[ri.empty() ? i : ri[i]] : local.descs[li.empty() ? i : li[i]];
  };
  bool ascending = true;
  uint64_t end = 0;  // of the last destination range
  for (size_t i = 0; i < n; ++i) {
    uint32_t a = li.empty() ? i : li[i], b = ri.empty() ? i : ri[i];
    if (a >= local.descs.size() || b >= remote.descs.size())
      return Status::InvalidArgument("descriptor index out of range at pair " + std::to_string(i));
    if (local.lens[a] != remote.lens[b])
      return Status::InvalidArgument("pair " + std::to_string(i) + ": local length " +
                                     std::to_string(local.lens[a]) + " != remote length " +
                                     std::to_string(remote.lens[b]));
    KVLANE_RETURN_IF_ERROR(CheckRemoteAccess(op, remote.descs[b], b));
    for (const PieceRange& pr : dst_of(i)) {
      ascending = ascending && pr.addr >= end;
      end = pr.addr + pr.len;
    }
  }
  if (ascending) return Status::Ok();
  std::vector<std::pair<uint64_t, uint64_t>> dst;  // start, end
  for (size_t i = 0; i < n; ++i) {
    for (const PieceRange& pr : dst_of(i)) dst.emplace_back(pr.addr, pr.addr + pr.len);
  }
  std::sort(dst.begin(), dst.end());
  for (size_t i = 1; i < dst.size(); ++i) {
    if (dst[i].first < dst[i - 1].second) {
      return Status::InvalidArgument(std::string(remote_dst ? "remote" : "local") +
                                     " destinations of the transfer overlap at " +
                                     Hex(dst[i].first) + ": two pairs would write the same bytes");
    }
  }
  return Status::Ok();
}

// Walks local and remote ranges of each descriptor pair in lockstep, cutting at
// every piece boundary of either side and at max_seg. REQUIRES: CheckPairs
// passed for these pairs.
void AgentImpl::BuildSegments(Request* r, const PreparedList& local, std::span<const uint32_t> li,
                              const PreparedList& remote, std::span<const uint32_t> ri,
                              uint64_t max_seg) {
  const size_t n = li.empty() ? local.descs.size() : li.size();
  for (size_t i = 0; i < n; ++i) {
    uint32_t a = li.empty() ? i : li[i], b = ri.empty() ? i : ri[i];
    const auto& L = local.descs[a];
    const auto& R = remote.descs[b];
    size_t x = 0, y = 0;
    uint64_t xo = 0, yo = 0;
    while (x < L.size() && y < R.size()) {
      uint64_t take = std::min({L[x].len - xo, R[y].len - yo, max_seg});
      AppendSegment(r, {L[x].addr + xo, R[y].addr + yo, R[y].piece.key, L[x].piece.key, take},
                    L[x].piece, R[y].piece, max_seg, ctx_.options.merge_adjacent);
      r->total_bytes += take;
      xo += take;
      yo += take;
      if (xo == L[x].len) ++x, xo = 0;
      if (yo == R[y].len) ++y, yo = 0;
    }
  }
  r->pairs = static_cast<uint32_t>(n);
}

// Bytes of the local side of a transfer (out-of-range indices are skipped here
// and rejected by CheckPairs); UINT64_MAX past kMaxTransferBytes (an index
// list may name one large descriptor many times: the sum must not wrap).
static uint64_t LocalBytes(const PreparedList& local, std::span<const uint32_t> li) {
  uint64_t total = 0;
  const size_t n = li.empty() ? local.lens.size() : li.size();
  for (size_t k = 0; k < n; ++k) {
    const uint32_t i = li.empty() ? static_cast<uint32_t>(k) : li[k];
    const uint64_t len = i < local.lens.size() ? local.lens[i] : 0;
    if (len > kMaxTransferBytes - total) return UINT64_MAX;
    total += len;
  }
  return total;
}

// The chunk size of a transfer: chunk_bytes, or smaller for a striped request
// that would otherwise not fill every lane (so a 2 MiB request on two lanes
// moves as two 1 MiB chunks in parallel): its share of the lanes rounded up to
// 4 KiB, never past chunk_bytes (which need not be a multiple of 4 KiB).
uint64_t AgentImpl::ChunkSizeFor(const Request& r) const {
  const uint64_t chunk = ctx_.options.chunk_bytes;
  const uint64_t lanes = static_cast<uint64_t>(r.channel->lane_count());
  if (!Striped(r) || lanes < 2 || r.total_bytes >= lanes * chunk) return chunk;
  uint64_t share = (r.total_bytes + lanes - 1) / lanes;
  return std::min(chunk, std::max<uint64_t>(4096, (share + 4095) / 4096 * 4096));
}

// Groups consecutive segments into chunks of at most chunk_bytes and
// max_segments_per_chunk segments.
static void PlanChunks(Request* r, uint64_t chunk_bytes, uint32_t max_segs) {
  ChunkPlan cur;
  for (uint32_t i = 0; i < r->segs.size(); ++i) {
    uint64_t len = r->segs[i].len;
    bool full = cur.seg_end > cur.seg_begin &&
                (cur.bytes + len > chunk_bytes || cur.seg_end - cur.seg_begin >= max_segs);
    if (full) {
      r->chunks.push_back(cur);
      cur = ChunkPlan{i, i, 0};
    }
    cur.seg_end = i + 1;
    cur.bytes += len;
  }
  r->chunks.push_back(cur);
}

// The local pieces of `r`'s segments, found live now: a prepared list keeps
// the pieces it resolved, which DeregisterMemory may have removed since.
Status AgentImpl::CollectLocalKeys(Request* r) const {
  r->local_removals = ctx_.registry->removals();  // before the lookup: a later removal re-checks
  std::vector<uint64_t> keys;
  for (const Segment& s : r->segs)
    if (keys.empty() || keys.back() != s.local_key) keys.push_back(s.local_key);
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  {
    std::lock_guard lock(r->keys_mu);
    r->local_keys.swap(keys);
  }
  return CheckLocalKeys(*r);
}

Status AgentImpl::AllSlotsTaken() const {
  size_t poisoned = 0;
  for (const auto& r : slots_) poisoned += r->poisoned.load(std::memory_order_acquire) ? 1 : 0;
  std::string why = "all " + std::to_string(slots_.size()) +
                    " transfer slots are in use (AgentOptions.max_requests)";
  if (poisoned > 0) {
    why += "; " + std::to_string(poisoned) +
           " of them held for good by transfers left poisoned (a target or GPU that may still "
           "copy their memory)";
  }
  return Status::NotAllowed(why);
}

Result<XferHandle> AgentImpl::MakeTransfer(Op op, PreparedId local_id, std::span<const uint32_t> li,
                                           PreparedId remote_id, std::span<const uint32_t> ri,
                                           std::string_view notif, XferOptions xo) {
  if (op != Op::kRead && op != Op::kWrite) return Status::InvalidArgument("unknown op");
  if (notif.size() > kMaxNotif) return Status::InvalidArgument("notification larger than 64 KiB");
  KVLANE_ASSIGN_OR_RETURN(auto local, GetPrepared(local_id));
  KVLANE_ASSIGN_OR_RETURN(auto remote, GetPrepared(remote_id));
  if (local->remote || !remote->remote)
    return Status::InvalidArgument("MakeTransfer wants a local list first, then a remote list");
  const size_t pairs = li.empty() ? local->descs.size() : li.size();
  if (pairs > kMaxTransferPairs)
    return Status::InvalidArgument("more than " + std::to_string(kMaxTransferPairs) +
                                   " descriptor pairs in one transfer: split it");
  const uint64_t bytes = LocalBytes(*local, li);
  if (bytes > kMaxTransferBytes)
    return Status::InvalidArgument("a transfer moves at most 1 TiB (kMaxTransferBytes): split it");
  // Every channel has lanes_per_peer lanes: the lane, the pairs and a free slot
  // are checked before any connection is made for the transfer.
  const int lanes = ctx_.options.lanes_per_peer;
  if (xo.lane < -1 || xo.lane >= lanes)
    return Status::InvalidArgument(
        "XferOptions::lane " + std::to_string(xo.lane) + " is not a lane of the channel (0.." +
        std::to_string(lanes - 1) + ", lanes_per_peer) nor -1 (the engine picks)");
  KVLANE_RETURN_IF_ERROR(CheckPairs(op, *local, li, *remote, ri));
  // Refused at once when no slot is free, but none is held across the connect
  // (which may take connect_timeout per connection): transfers to other peers
  // meanwhile find the slots there are.
  auto take_slot = [this]() -> Result<uint32_t> {
    std::lock_guard lock(free_mu_);
    if (free_slots_.empty()) return AllSlotsTaken();
    const uint32_t slot = free_slots_.back();
    free_slots_.pop_back();
    return slot;
  };
  {
    std::lock_guard lock(free_mu_);
    if (free_slots_.empty()) return AllSlotsTaken();
  }
  KVLANE_ASSIGN_OR_RETURN(Channel * ch, EnsureChannel(*remote->peer, local->kind, remote->kind));
  KVLANE_ASSIGN_OR_RETURN(const uint32_t slot, take_slot());
  Request* r = slots_[slot].get();
  r->op = op;
  r->local_kind = local->kind;
  r->peer = remote->peer;
  r->channel = ch;
  r->notif.assign(notif);
  r->fixed_lane = xo.lane;
  r->stripe = xo.stripe;
  r->last_lane = -1;
  r->total_bytes = bytes;  // decides striping and the chunk size
  const uint64_t chunk = ChunkSizeFor(*r);
  r->total_bytes = 0;
  BuildSegments(r, *local, li, *remote, ri, chunk);
  PlanChunks(r, chunk, ctx_.options.max_segments_per_chunk);
  Status s = CollectLocalKeys(r);
  if (!s.ok()) {
    FreeSlot(r);
    return s;
  }
  r->in_use.store(true, std::memory_order_relaxed);  // before the record's release store
  uint32_t gen = RecordGen(r->record.load(std::memory_order_relaxed)) + 1;
  r->gen = gen;
  r->settled.store(gen, std::memory_order_relaxed);
  r->record.store(PackRecord(gen, Code::kOk), std::memory_order_release);  // "not posted": idle
  return XferHandle{slot, gen};
}

}  // namespace kvlane::core
