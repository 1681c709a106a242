// The lanes of a CudaChannel: issue (check, route, launch) and retire (poll the
// pinned completion word, retire FIFO).
#include <algorithm>
#include <optional>
#include <thread>

#include "core/hop_trace.h"
#include "core/request.h"
#include "gpu/copy_launch.h"
#include "transport/cuda/cuda_channel.h"
#include "transport/cuda/cuda_check.h"

namespace kvlane::core {
namespace {

using Clock = std::chrono::steady_clock;

constexpr uint64_t kCopyEngineMinBytes = 256u << 10;  // contiguous runs this big use a copy engine
constexpr uint64_t kUnitBytes = 64u << 10;  // copy kernel: one block per segment, or per 64 KiB of one
constexpr uint64_t kMaxGrid = 1u << 20;     // beyond this many units blocks loop over them
constexpr auto kYieldAfter = std::chrono::microseconds(20);  // a spinning issue thread then yields
constexpr int kIdlePauses = 16;  // pauses between two looks of an idle issue thread (~1 us)

void CpuRelax() {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#endif
}

// A region of the transfer that the peer deregistered since the table was built.
bool AnyRevoked(const XferTable& t) {
  for (const auto& p : t.pieces)
    if (p->revoked.load(std::memory_order_seq_cst)) return true;
  return false;
}

}  // namespace

void CudaChannel::IssueLoop(int i) {
  (void)cudaSetDevice(device_);  // this thread's launches and allocations go to the channel's GPU
  LaneQueue& q = queue(i);
  Lane& l = *lanes_[i];
  Clock::time_point active = Clock::now();
  uint64_t seen = UINT64_MAX;  // the head ticket found at the last look
  while (!closing().load(std::memory_order_acquire)) {
    MirrorErrors(l);
    if (l.proxy.running()) {  // renewal, or a relaunch after the kernel left on its own
      if (Status s = l.proxy.Tend(); !s.ok()) Fail(s);
    }
    if (q.PeekIssue() == nullptr) {
      IdleWait(i, &active);
      continue;
    }
    // A posting thread issues its own post right after queuing it (Kick):
    // leave a head alone until it was there at the previous look too, so that
    // this thread neither races the poster for the lock nor pulls the
    // queue's lines away from it. Posts Kick cannot issue wait one look.
    if (const uint64_t head = q.issue_ticket(); head != seen) {
      seen = head;
      for (int k = 0; k < kIdlePauses; ++k) CpuRelax();
      continue;
    }
    if (l.issued.load(std::memory_order_relaxed) - l.retired.load(std::memory_order_acquire) >= kBatchRing) {
      std::this_thread::yield();  // every completion word is in use
      continue;
    }
    std::unique_lock lock(l.issue_mu, std::try_to_lock);
    if (!lock.owns_lock()) {  // a posting thread is issuing (Kick)
      CpuRelax();
      continue;
    }
    // A posting thread may have issued it between the peek and the lock, or
    // taken the ring's last free batch (Kick checks the ring under the lock;
    // so does this): a batch still in flight is never overwritten.
    if (q.PeekIssue() != nullptr &&
        l.issued.load(std::memory_order_relaxed) - l.retired.load(std::memory_order_acquire) <
            kBatchRing) {
      KVLANE_HOP_BY_POSTER(0);
      IssueBatch(i, false);
    }
    active = Clock::now();
  }
  std::lock_guard lock(l.issue_mu);  // no Kick issues once closing is set (it checks under the lock)
  for (;;) {  // closing: what is still queued retires as canceled, in ticket order
    while (l.issued.load(std::memory_order_relaxed) - l.retired.load(std::memory_order_acquire) >= kBatchRing)
      std::this_thread::yield();
    if (q.PeekIssue() == nullptr) break;
    IssueBatch(i, true);
  }
  l.issuer_done.store(true, std::memory_order_release);
  l.bell.fetch_add(1, std::memory_order_release);
  l.bell.notify_all();
}

// How a posting thread may issue `w` itself: not yet when the table must be
// built first or every completion word is in use; a small request whose proxy
// is not running starts it when the previous launch has returned (one launch,
// no wake-up of the issue thread). REQUIRES: l.issue_mu held.
CudaChannel::Route CudaChannel::RouteOf(const Lane& l, const WorkItem& w) const {
  if (l.issued.load(std::memory_order_relaxed) - l.retired.load(std::memory_order_acquire) >= kBatchRing)
    return Route::kNotYet;
  const auto* t =
      static_cast<const XferTable*>(w.req->transport_ready.load(std::memory_order_acquire));
  if (t == nullptr || !t->error.ok()) return Route::kNotYet;
  const Request& r = *w.req;
  if (!FitsProxy(l, r.total_bytes, r.chunks.back().seg_end - r.chunks[w.chunk].seg_begin))
    return Route::kLaunch;
  if (l.proxy.running()) return Route::kProxy;
  return l.proxy.Exited() ? Route::kStartProxy : Route::kNotYet;
}

void CudaChannel::Kick(int i) {
  Lane& l = *lanes_[i];
  std::unique_lock lock(l.issue_mu, std::try_to_lock);
  if (!lock.owns_lock()) return;  // the issue thread (or another poster) has it
  if (closing().load(std::memory_order_acquire) || latch().latched()) return;
  std::optional<DeviceGuard> guard;  // launches go to the channel's GPU; a proxy entry needs none
  LaneQueue& q = queue(i);
  for (WorkItem* w = q.PeekIssue(); w != nullptr; w = q.PeekIssue()) {
    const Route route = RouteOf(l, *w);
    if (route == Route::kNotYet) return;
    if (route != Route::kProxy && !guard) guard.emplace(device_);
    KVLANE_HOP_BY_POSTER(1);
    IssueBatch(i, false);
    // The issue thread may be asleep; it must watch the proxy this started
    // (idle exit, renewal), or a caller's device-wide sync would wait forever.
    if (route == Route::kStartProxy) q.Wake();
  }
}

// The hop through the lane queue costs a posting thread about 1 us of cache
// traffic (ticket, queue item, issue cursor, Kick) before the GPU sees the
// work; a post on an idle lane skips it. The conditions of a direct post in
// IssueBatch (FIFO: no ticket taken on the lane and not issued; for a proxy
// post nothing in flight the host publishes, for any other nothing in flight
// at all), plus a built table and, for the proxy, a running chain; else the
// caller queues.
bool CudaChannel::PostWhole(Request* r, int i) {
  KVLANE_HOP(kHopQueued);  // (the trace's hops: this path has no queue or issue step;
                           // queued = Post's own part done, issue = the checks here done)
  Lane& l = *lanes_[i];
  if (!DevicePublishes(*r)) return false;
  const auto* t = static_cast<const XferTable*>(r->transport_ready.load(std::memory_order_acquire));
  if (t == nullptr || !t->error.ok()) return false;
  const uint32_t sb = r->chunks.front().seg_begin, se = r->chunks.back().seg_end;
  const bool proxy = FitsProxy(l, r->total_bytes, se - sb);
  if (proxy && !l.proxy.running()) return false;
  std::unique_lock lock(l.issue_mu, std::try_to_lock);
  if (!lock.owns_lock() || closing().load(std::memory_order_acquire) || latch().latched() ||
      !queue(i).AllIssued() || (proxy && !l.proxy.running()))
    return false;
  const uint64_t seq = l.issued.load(std::memory_order_relaxed);
  if (seq - l.retired.load(std::memory_order_acquire) >= kBatchRing || !InOrder(l, seq, proxy))
    return false;
  KVLANE_HOP(kHopIssue);
  KVLANE_HOP_BY_POSTER(1);
  l.issuing.store(true, std::memory_order_seq_cst);  // pairs with HandleRevoke
  const WorkItem whole{r, 0, r->gen, static_cast<uint32_t>(r->chunks.size())};
  // A Cancel racing the post, or a revoked region: the queued path reports it
  // (and begins the post again: a begun one would keep refusing a Cancel).
  const bool started = BeginChunk(whole);
  if (!started || AnyRevoked(*t)) {
    if (started) UnbeginChunk(whole);
    l.issuing.store(false, std::memory_order_seq_cst);
    return false;
  }
  Batch& b = l.batches[seq % kBatchRing];
  KVLANE_HOP(kHopBuilt);
  const uint64_t record_value = PackRecord(r->gen, Code::kOk);
  bool record_only = false;
  Status s;
  if (proxy) {
    s = l.proxy.Submit(t->host_segs.data(), sb, se, seq + 1, r->slot + 1, r->gen, t->dst_on_device,
                       io_timeout_);
  } else {
    DeviceGuard guard(device_);  // launches go to the channel's GPU
    s = Launch(l, *t, sb, se, r->total_bytes, seq, RecordOf(*r), record_value, &record_only);
  }
  KVLANE_HOP(kHopSubmitted);
  if (!proxy || !s.ok()) l.host_after = seq + 1;  // a later proxy post must not overtake it
  if (!s.ok()) Fail(s);                           // a CUDA error on a lane is fatal for the channel
  b.items = 0;
  b.whole = whole;
  b.status = s;
  b.SetRecord(s.ok() ? RecordOf(*r) : nullptr, record_value, record_only);
  // A launched post counts as the lane's queued bytes until it retires, like
  // a queued one, so that the next small post picks another lane
  // (AgentImpl::PickLane) rather than one moving a bulk copy; added before the
  // retire thread can see the batch. A proxy post is not counted: it is done
  // in microseconds, and the count would cost each small post a cache line
  // the retire thread wrote (PickLane reads it).
  b.bytes = proxy ? 0 : r->total_bytes;
  if (b.bytes != 0) queue(i).AddBytes(b.bytes);
  Issued(l, seq, s.ok());
  return true;
}

bool CudaChannel::FitsProxy(const Lane& l, uint64_t bytes, uint32_t segs) const {
  return l.proxy.enabled() && bytes <= proxy_max_bytes_ && segs <= gpu::kProxyMaxSegs;
}

bool CudaChannel::DevicePublishes(const Request& r) const {
  return records_ != nullptr && direct_publication() && r.notif.empty() && r.slot < record_slots_;
}

bool CudaChannel::InOrder(const Lane& l, uint64_t seq, bool proxy) const {
  const uint64_t retired = l.retired.load(std::memory_order_acquire);
  return seq == retired || (proxy && proxy_blocks_ == 1 && l.host_after <= retired);
}

void CudaChannel::Batch::SetRecord(uint64_t* at, uint64_t value, bool only) {
  direct = at != nullptr;
  record.store(at, std::memory_order_relaxed);
  record_value.store(value, std::memory_order_relaxed);
  record_only.store(direct && only, std::memory_order_relaxed);
}

void CudaChannel::Issued(Lane& l, uint64_t seq, bool launched) {
  l.batches[seq % kBatchRing].launched.store(launched, std::memory_order_release);
  l.issued.store(seq + 1, std::memory_order_release);
  l.issuing.store(false, std::memory_order_seq_cst);
  l.bell.fetch_add(1, std::memory_order_release);
  l.bell.notify_one();
}

// Nothing queued. The thread keeps spinning (pause, then yield) while the lane
// has batches in flight and for `spin` after: the next post usually follows a
// completion at once, and a futex wake-up costs more than the whole small
// transfer. A running proxy keeps it awake for the idle exit (IssueLoop tends
// it meanwhile); then the proxy is told to exit and the thread sleeps until a
// post. This thread is the only one that stops the proxy: whoever starts it
// (Kick) wakes this thread.
void CudaChannel::IdleWait(int i, Clock::time_point* active) {
  Lane& l = *lanes_[i];
  const auto now = Clock::now();
  const bool busy = l.issued.load(std::memory_order_relaxed) != l.retired.load(std::memory_order_acquire);
  static thread_local Clock::time_point busy_seen, use_seen;  // one issue thread per lane
  static thread_local uint64_t uses_seen = 0;
  if (busy) busy_seen = now;
  if (const uint64_t u = l.proxy.uses(); u != uses_seen) uses_seen = u, use_seen = now;
  const auto quiet = now - std::max(*active, busy_seen);
  const bool proxy_hot = l.proxy.running() && now - use_seen < proxy_idle_exit_;
  if (busy || quiet < spin_ || proxy_hot) {
    if (now - *active > kYieldAfter && !proxy_hot) {
      std::this_thread::yield();
    } else {
      // Posting threads issue most work themselves (Kick): look rarely, so
      // that this thread does not pull the queue's cache lines away from them.
      for (int k = 0; k < kIdlePauses; ++k) CpuRelax();
    }
    return;
  }
  {
    std::unique_lock lock(l.issue_mu, std::try_to_lock);
    if (!lock.owns_lock()) return;  // a poster is issuing: not idle
    // A post issued between the looks above and the lock: not idle either (an
    // exit entry right behind it would cost the next post a relaunch).
    if (l.issued.load(std::memory_order_relaxed) != l.retired.load(std::memory_order_acquire) ||
        l.proxy.uses() != uses_seen)
      return;
    l.proxy.Quiesce();
  }
  queue(i).WaitForIssue(std::chrono::microseconds(0));
  *active = Clock::now();
}

// Errors cross between the host latch and the proxy both ways.
void CudaChannel::MirrorErrors(Lane& l) {
  if (!l.proxy.enabled()) return;
  if (latch().latched()) {
    l.proxy.MirrorLatch();
  } else if (uint32_t code = l.proxy.gpu_error()) {
    Fail(Status::Backend("cuda proxy kernel raised a GPU-side error (code " + std::to_string(code) + ")"));
  }
}

// Takes the queued chunks of first.req right behind `first` (no waiting).
uint32_t CudaChannel::Gather(int i, const WorkItem& first, uint32_t* last) {
  LaneQueue& q = queue(i);
  uint32_t items = 1;
  for (WorkItem* nx = q.PeekIssue(); nx != nullptr; nx = q.PeekIssue()) {
    if (nx->req != first.req || nx->gen != first.gen || nx->chunk != *last + 1) break;
    (void)BeginChunk(*nx);  // cannot be canceled: the post already started
    *last += nx->count;
    q.AdvanceIssue();
    ++items;
  }
  return items;
}

// Takes the head item and moves the whole rest of its request at once (the
// core puts every chunk of a cuda request on one lane: stripe_bulk() is
// false). Chunks of it that were queued later retire as their own batch,
// behind the one that moved them.
void CudaChannel::IssueBatch(int i, bool closing) {
  LaneQueue& q = queue(i);
  Lane& l = *lanes_[i];
  KVLANE_HOP(kHopIssue);
  WorkItem first = *q.PeekIssue();
  q.AdvanceIssue();
  Request* r = first.req;
  const uint64_t seq = l.issued.load(std::memory_order_relaxed);
  Batch& b = l.batches[seq % kBatchRing];
  uint32_t last = first.chunk + first.count - 1;
  bool launched = false, direct = false, record_only = false;
  uint64_t bytes = 0;
  Status s;
  l.issuing.store(true, std::memory_order_seq_cst);  // pairs with HandleRevoke
  if (r == l.ahead_req && first.gen == l.ahead_gen && first.chunk <= l.ahead_last) {
    (void)BeginChunk(first);
    b.items = Gather(i, first, &last);  // already moving under an earlier batch
  } else {
    const bool started = BeginChunk(first);
    b.items = started ? Gather(i, first, &last) : 1;
    s = !started ? Status::Canceled("canceled before a lane started it")
        : closing ? Status::Canceled("channel closed")
                  : latch().Get();
    // Built once, by the request's first post (under build_mu_), published
    // with release; read with acquire: no build_mu_ needed.
    auto* t = static_cast<XferTable*>(r->transport_ready.load(std::memory_order_acquire));
    if (s.ok()) s = t != nullptr ? t->error : TableFor(r, &t);
    if (s.ok() && AnyRevoked(*t))
      s = Status::RemoteStale("peer '" + peer_name_ + "' deregistered a region of this transfer");
    if (s.ok()) {
      const uint32_t end = static_cast<uint32_t>(r->chunks.size()) - 1;
      for (uint32_t c = first.chunk; c <= end; ++c) bytes += r->chunks[c].bytes;
      const uint32_t sb = r->chunks[first.chunk].seg_begin, se = r->chunks[end].seg_end;
      // The GPU publishes the post itself (the record with the completion
      // word, behind one fence), so Check sees it without the retire thread's
      // hop (and without its futex wake-up, tens of us on a VM, when it
      // sleeps): when nothing else is in flight on the lane (FIFO holds), one
      // item carries the whole post, it has no notification (sent after the
      // data, by the retire thread), and records are published as each
      // request finishes (not in global order).
      // A proxy post may also follow other such posts still in flight: one
      // proxy block publishes its entries in ring order.
      const bool proxy = FitsProxy(l, bytes, se - sb);
      direct = DevicePublishes(*r) && InOrder(l, seq, proxy) && first.chunk == 0 && last == end &&
               b.items == 1;
      uint64_t* record = direct ? RecordOf(*r) : nullptr;
      const uint64_t record_value = PackRecord(first.gen, Code::kOk);
      KVLANE_HOP(kHopBuilt);
      s = proxy ? l.proxy.Submit(t->host_segs.data(), sb, se, seq + 1, direct ? r->slot + 1 : 0,
                                 first.gen, t->dst_on_device, io_timeout_)
                : Launch(l, *t, sb, se, bytes, seq, record, record_value, &record_only);
      if (!(proxy && direct)) l.host_after = seq + 1;
      launched = s.ok();
      if (!s.ok()) Fail(s);  // a CUDA error on a lane is fatal for the channel
      if (launched && end > last) l.ahead_req = r, l.ahead_gen = first.gen, l.ahead_last = end;
    }
  }
  KVLANE_HOP(kHopSubmitted);
  if (!launched) l.host_after = seq + 1;
  b.status = s;
  b.SetRecord(direct && launched ? RecordOf(*r) : nullptr, PackRecord(first.gen, Code::kOk),
              record_only);
  b.bytes = bytes;
  Issued(l, seq, launched);
}

// The proxy kernel writes a record as generation << 32 (status ok) at
// records + slot * kRecordStride: the layout of PackRecord and RecordTable.
static_assert(PackRecord(7, Code::kOk) == uint64_t{7} << 32);
static_assert(gpu::kRecordStride == RecordTable::kStride);

uint64_t* CudaChannel::RecordOf(const Request& r) const {
  return reinterpret_cast<uint64_t*>(records_ + uint64_t{r.slot} * gpu::kRecordStride);
}

Status CudaChannel::Launch(Lane& l, const XferTable& t, uint32_t sb, uint32_t se, uint64_t bytes,
                           uint64_t seq, uint64_t* record, uint64_t record_value,
                           bool* record_only) {
  uint64_t* done = &l.done[seq % kBatchRing];
  const uint64_t value = seq + 1;
  if (t.contig_end[sb] >= se && bytes >= kCopyEngineMinBytes) {
    const gpu::CopySeg& g = t.host_segs[sb];
    KVLANE_CUDA(cudaMemcpyAsync(reinterpret_cast<void*>(g.dst), reinterpret_cast<const void*>(g.src),
                                bytes, cudaMemcpyDefault, l.ce));
    if (Driver().write_value64 != nullptr) {
      // Default flags: the write is fenced after the stream's earlier work.
      // A record stands for the completion word (one stream write, not two:
      // each costs a fence; the retire thread polls the record instead).
      auto write = [&](uint64_t* at, uint64_t v) {
        return Driver().write_value64(l.ce, reinterpret_cast<unsigned long long>(at), v, 0) == 0;
      };
      if (record != nullptr ? (*record_only = write(record, record_value)) : write(done, value))
        return Status::Ok();
      // A failed write leaves nothing half done that matters: the kernel
      // below writes both.
    }
    const cudaError_t e = gpu::LaunchSignal({nullptr, done, value, record, record_value}, l.ce);
    if (e != cudaSuccess) {
      // The copy is queued and nothing will say when it ends: wait for it
      // here, so that the error published for this post never comes while
      // the post's memory is still being read or written.
      (void)cudaStreamSynchronize(l.ce);
      return CudaStatus(e, "LaunchSignal", __FILE__, __LINE__);
    }
    return Status::Ok();
  }
  // One block per unit (a segment, or kUnitBytes of a large one): the block
  // scheduler balances a scattered list better than a fixed grid-stride.
  const uint32_t parts = static_cast<uint32_t>(std::clamp<uint64_t>((t.max_len + kUnitBytes - 1) / kUnitBytes, 1, 4096));
  const uint64_t units = uint64_t{se - sb} * parts;
  const int blocks = static_cast<int>(std::min(units, kMaxGrid));
  KVLANE_CUDA(gpu::LaunchCopySegments(
      t.segs, sb, se, parts, blocks, {l.blocks_finished, done, value, record, record_value},
      t.dst_on_device ? gpu::BlockFence::kDevice : gpu::BlockFence::kSystem, l.sm));
  return Status::Ok();
}

void CudaChannel::RetireLoop(int i) {
  (void)cudaSetDevice(device_);
  Lane& l = *lanes_[i];
  uint64_t seq = 0;
  for (;;) {
    uint32_t bell = l.bell.load(std::memory_order_acquire);
    if (seq == l.issued.load(std::memory_order_acquire)) {
      if (l.issuer_done.load(std::memory_order_acquire) && seq == l.issued.load(std::memory_order_acquire))
        break;
      // Spin for `spin`, and for as long as the proxy runs (small transfers
      // are flowing): a futex wake-up would cost more than the transfer.
      auto until = Clock::now() + spin_;
      while (l.bell.load(std::memory_order_acquire) == bell &&
             (Clock::now() < until || l.proxy.running()) && !l.issuer_done.load(std::memory_order_acquire))
        CpuRelax();
      if (l.bell.load(std::memory_order_acquire) == bell)
        l.bell.wait(bell, std::memory_order_acquire);
      continue;
    }
    Batch& b = l.batches[seq % kBatchRing];
    Status s = b.launched.load(std::memory_order_acquire) ? WaitDone(l, seq) : b.status;
    KVLANE_HOP(kHopDoneSeen);
    if (b.items == 0 && b.bytes != 0) queue(i).TakeBytes(b.bytes);  // what PostWhole counted
    if (b.direct) {
      // The record comes with the completion word (either order); a lane that
      // gave up meanwhile treats its wait like a failed WaitDone, below.
      if (s.ok()) s = WaitRecord(l, b);
      if (!s.ok()) {
        Request* r = b.items == 0 ? b.whole.req : queue(i).PeekRetire()->req;
        // Given up on while the GPU holds it: the record may land at any time.
        if (l.wedged) Poison(*r);
        // The GPU may have finished this post before the lane saw an error
        // (record and word land in either order): then it stands, and the
        // owner may already have posted again, so the host must not touch it.
        // A record that landed before the poison is seen here.
        if (b.RecordLanded()) {
          s = Status::Ok();
          r->poisoned.store(false, std::memory_order_release);  // the GPU is done with it
        }
      }
      if (s.ok()) {
        // The lane's count first: a post of the owner that follows is
        // published by the GPU only behind batches the lane counts as retired.
        const WorkItem w = b.items == 0 ? b.whole : TakeDirect(i, b.bytes);
        l.retired.store(++seq, std::memory_order_release);
        SettleDirect(w);
        KVLANE_HOP(kHopPublished);
        continue;
      }
      // No record, and none will come: a CUDA error is sticky and a skipped
      // entry gets none. Only a wedged GPU might still write it (poisoned
      // above: that slot is never reused). The host publishes the error.
    }
    // A launched batch given up on while the GPU is wedged may still move its
    // data later: its requests are poisoned (never reused; DeregisterMemory of
    // their regions fails instead of letting the memory go).
    const bool abandoned = !s.ok() && l.wedged && b.launched.load(std::memory_order_acquire);
    if (b.items == 0) {
      if (abandoned) b.whole.req->poisoned.store(true, std::memory_order_release);
      RetireWhole(b.whole, s);
    }
    for (uint32_t k = 0; k < b.items; ++k) {
      if (abandoned) queue(i).PeekRetire()->req->poisoned.store(true, std::memory_order_release);
      RetireHead(i, s);
    }
    KVLANE_HOP(kHopPublished);
    l.retired.store(++seq, std::memory_order_release);
  }
}

// Poisoned before the lane's last look at the record, with a full fence
// between: a Check that read {gen, ok} unpoisoned read a record that landed
// before the poison, which that look then sees (the post stands as ok). A
// record landing after the look finds the post poisoned, and Check waits out
// the lane's error (AgentImpl::Check).
void CudaChannel::Poison(Request& r) {
  if (give_up_hook_) give_up_hook_();
  r.poisoned.store(true, std::memory_order_seq_cst);
  std::atomic_thread_fence(std::memory_order_seq_cst);  // the store before the look that follows
}

bool CudaChannel::Batch::RecordLanded() const {
  const uint64_t want = record_value.load(std::memory_order_acquire);
  return Landed(std::atomic_ref<uint64_t>(*record.load(std::memory_order_acquire))
                    .load(std::memory_order_acquire),
                want);
}

// A direct batch's record lands with its completion word, in either order
// (one fence before both): wait for it too before letting go of the request,
// or a Wait() woken by the settle could read the record still in progress and
// sleep on. Bounded like WaitDone.
Status CudaChannel::WaitRecord(Lane& l, const Batch& b) {
  const auto deadline = Clock::now() + io_timeout_;
  for (uint32_t n = 1; !b.RecordLanded(); ++n) {
    if (l.wedged) return latch().Get();
    CpuRelax();
    if (n % 4096 != 0) continue;
    KVLANE_RETURN_IF_ERROR(PollErrors(l));
    if (Clock::now() < deadline) continue;
    l.wedged = true;
    Status s = Status::Timeout("cuda lane: a request's record did not land within io_timeout");
    Fail(s);
    return latch().Get();
  }
  return Status::Ok();
}

// Polls the batch's pinned completion word. Every few thousand polls it asks
// the streams (non-blocking) whether the GPU hit an error, which then latches;
// a batch that stays unfinished for io_timeout latches a timeout (GPU wedged).
Status CudaChannel::WaitDone(Lane& l, uint64_t seq) {
  const Batch& b = l.batches[seq % kBatchRing];
  const bool record_only = b.record_only.load(std::memory_order_relaxed);  // the record is the word
  std::atomic_ref<uint64_t> word(l.done[seq % kBatchRing]);
  Clock::time_point deadline = Clock::time_point::max();
  for (uint32_t n = 1;; ++n) {
    // Acquire pairs with the GPU's system fence before it stored the word: the
    // data is visible once the word is.
    if (record_only) {
      if (b.RecordLanded()) return Status::Ok();
    } else if (const uint64_t w = word.load(std::memory_order_acquire);
               (w & ~gpu::kDoneSkipped) >= seq + 1) {
      if ((w & gpu::kDoneSkipped) == 0) return Status::Ok();
      MirrorErrors(l);  // skipped by the proxy: the host latched, or the proxy raised an error
      Status s = latch().Get();
      if (s.ok()) Fail(s = Status::Backend("cuda proxy skipped a copy"));
      return s;
    }
    if (l.wedged) return latch().Get();
    CpuRelax();
    if (n % 4096 != 0) continue;
    KVLANE_RETURN_IF_ERROR(PollErrors(l));
    const auto now = Clock::now();
    if (deadline == Clock::time_point::max()) deadline = now + io_timeout_;
    if (now > deadline) {
      l.wedged = true;
      Status s = Status::Timeout("cuda lane: the GPU did not finish a copy within io_timeout (GPU wedged?)");
      Fail(s);
      return latch().Get();
    }
    if (n % (1u << 20) == 0) std::this_thread::yield();
  }
}

// A CUDA error on a lane's streams latches and ends the wait; a GPU-side error
// raised by the proxy latches too (the proxy then acknowledges without copying).
Status CudaChannel::PollErrors(Lane& l) {
  MirrorErrors(l);
  for (cudaStream_t st : {l.sm, l.ce, l.proxy.stream(0), l.proxy.stream(1)}) {
    if (st == nullptr) continue;
    cudaError_t e = cudaStreamQuery(st);
    if (e != cudaSuccess && e != cudaErrorNotReady) {
      Status err = CudaStatus(e, "copy on a cuda lane", __FILE__, __LINE__);
      Fail(err);
      return err;
    }
  }
  return Status::Ok();
}

}  // namespace kvlane::core
