#include "transport/stream/stream_channel.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <optional>
#include <span>
#include <thread>

#include "core/backoff.h"
#include "core/peer_code.h"
#include "core/request.h"
#include "core/staging_quota.h"
#include "core/start_thread.h"
#include "core/sys.h"
#include "transport/notif_queue.h"
#include "transport/stream/staged_io.h"

namespace kvlane::core {
namespace {

// The copier in `slot`, made at its first use (for device memory at `first`).
Result<DeviceCopier*> CopierIn(std::unique_ptr<DeviceCopier>& slot, const void* first,
                               StagingCopy how) {
  if (slot == nullptr) {
    KVLANE_ASSIGN_OR_RETURN(slot, MakeDeviceCopier(first, how, /*peer=*/""));
  }
  return slot.get();
}

}  // namespace

StreamChannel::StreamChannel(const AgentContext& ctx, PayloadMode mode, const char* name)
    : Channel(ctx.options.lanes_per_peer, ctx.options.lane_ring_slots, ctx.completer),
      mode_(mode),
      name_(name),
      spin_(ctx.options.spin),
      io_timeout_(ctx.options.io_timeout),
      staging_copy_(ctx.options.staging_copy),
      max_segs_(std::min<uint32_t>(ctx.options.max_segments_per_chunk, kMaxWireSegs)),
      inline_bytes_(ctx.options.post_inline_bytes) {}

Result<std::unique_ptr<Channel>> StreamChannel::Open(const AgentContext& ctx, PayloadMode mode,
                                                     const char* name, const Dialer& dial) {
  // Each connection's connect and handshake share one connect_timeout: a slow
  // link's lanes each get the whole of it (one deadline for all of them would cut
  // an honest open of many lanes over a long round trip).
  auto by = [&ctx] { return DeadlineIn(ctx.options.connect_timeout); };
  std::unique_ptr<StreamChannel> ch(new StreamChannel(ctx, mode, name));
  // A receive that gets no byte for io_timeout fails (a peer that stops half
  // way through a reply: the lane latches kTimeout). Lanes send without a
  // timeout: a target sending a long READ reply does not read meanwhile, and
  // the receiver's io_timeout covers a peer that reads nothing at all. A
  // notification's send (at most 64 KiB) is bounded too: Notify holds the
  // control connection, which transfers' notifications and Close wait for.
  KVLANE_ASSIGN_OR_RETURN(ch->control_, dial(ConnRole::kControl, by()));
  KVLANE_RETURN_IF_ERROR(SetIoTimeout(ch->control_.get(), ctx.options.io_timeout));
  for (int i = 0; i < ch->lane_count(); ++i) {
    auto l = std::make_unique<Lane>();
    KVLANE_ASSIGN_OR_RETURN(l->fd, dial(ConnRole::kLane, by()));
    l->wake = Fd(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    if (!l->wake.valid()) return ErrnoStatus("eventfd", errno);
    KVLANE_RETURN_IF_ERROR(SetRecvTimeout(l->fd.get(), ctx.options.io_timeout));
    l->segs.resize(ch->max_segs_);
    l->send_iov.resize(ch->max_segs_ + 2);
    l->recv_iov.resize(ch->max_segs_);
    ch->lanes_.push_back(std::move(l));
  }
  // Each lane's receiver before its sender: a sender waits for its receiver
  // to finish (Send), so one whose receiver could not start would hold Close.
  // A lane left without threads is only closed (nothing was posted yet).
  for (int i = 0; i < ch->lane_count(); ++i) {
    Lane& l = *ch->lanes_[i];
    KVLANE_RETURN_IF_ERROR(
        StartThread(&l.receiver, "stream lane receiver", [p = ch.get(), i] { p->Receive(i); }));
    KVLANE_RETURN_IF_ERROR(
        StartThread(&l.sender, "stream lane sender", [p = ch.get(), i] { p->Send(i); }));
  }
  return std::unique_ptr<Channel>(std::move(ch));
}

void StreamChannel::Fail(int i, const Status& s) {
  // A lane call that failed after Close shut the lanes down (a Kick's send
  // past its closing check, a sender blocked in a send; on tcp a receiver's read)
  // failed because of the Close, not of the peer: what it ends is canceled.
  // Close sets closing before its shutdown, and the failed call returned after
  // that shutdown (the kernel orders both on the socket).
  const bool closed = closing().load(std::memory_order_acquire);
  latch().Latch(closed ? Status::Canceled("channel closed") : s);
  ShutLanes();
  (void)i;
  for (int k = 0; k < lane_count(); ++k) queue(k).Wake();
}

void StreamChannel::ShutLanes() {
  const int how = mode_ == PayloadMode::kCma ? SHUT_WR : SHUT_RDWR;
  for (auto& l : lanes_) {
    shutdown(l->fd.get(), how);
    const uint64_t one = 1;
    (void)!write(l->wake.get(), &one, sizeof(one));
  }
}

bool StreamChannel::AwaitTargetDone(Lane& l) {
  const Deadline by = DeadlineIn(kTargetDoneFactor * io_timeout_ + kTargetDoneSlack);
  char sink[4096];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        by - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    Status s = WaitReadable(l.fd.get(), left);
    if (s.code() == Code::kTimeout) return false;
    if (!s.ok()) return false;  // cannot tell: count the memory as held
    const ssize_t n = recv(l.fd.get(), sink, sizeof(sink), MSG_DONTWAIT);  // replies: dropped
    if (n == 0) return true;  // end of file: the target's frame loop ended
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      return true;  // reset: the target closed with our frames unread
  }
}

uint64_t StreamChannel::FrameBytes(const WorkItem& w) const {
  const Request& r = *w.req;
  const ChunkPlan& c = r.chunks[w.chunk];
  if (r.local_kind == MemoryKind::kCuda) return UINT64_MAX;
  uint64_t n = sizeof(FrameHeader) + uint64_t{c.seg_end - c.seg_begin} * sizeof(WireSeg);
  if (mode_ != PayloadMode::kCma && r.op == Op::kWrite) n += c.bytes;
  return n;
}

Result<bool> StreamChannel::Issue(int i, Lane& l, WorkItem& w, bool if_room) {
  // Read by the receiver after AdvanceIssue's release.
  w.canceled = !BeginChunk(w);
  KVLANE_ASSIGN_OR_RETURN(bool sent, SendItem(l, w, if_room));
  if (!sent) {  // no room, nothing sent: the chunk is queued again, not started
    UnbeginChunk(w);
    return false;
  }
  ++l.sent;
  queue(i).AdvanceIssue();
  return true;
}

void StreamChannel::Kick(int i) {
  if (inline_bytes_ == 0) return;
  Lane& l = *lanes_[i];
  LaneQueue& q = queue(i);
  // The post queued without waking the sender (kick_rings): ring whenever
  // something may be left queued. A holder of the lock is the sender (awake)
  // or another poster's Kick, which rings only for what it saw.
  std::unique_lock lock(l.issue_mu, std::try_to_lock);
  if (!lock.owns_lock()) return q.Ring();
  if (closing().load(std::memory_order_acquire) || latch().latched()) return q.Ring();
  // Every earlier frame answered: the peer has read them all, so the socket
  // holds nothing of ours that could make this send wait.
  if (l.replied.load(std::memory_order_acquire) != l.sent) return q.Ring();
  WorkItem* w = q.PeekIssue();
  if (w == nullptr) return;  // the sender took it
  if (FrameBytes(*w) > inline_bytes_) return q.Ring();
  Result<bool> sent = Issue(i, l, *w, /*if_room=*/true);
  if (!sent.ok()) {
    Fail(i, sent.status());  // the item stays queued: the drain retires it (Fail wakes the lanes)
    return;
  }
  if (sent.value()) inline_frames_.fetch_add(1, std::memory_order_relaxed);
  if (sent.value() && l.receiver_asleep.load(std::memory_order_seq_cst)) {
    const uint64_t one = 1;  // the receiver's wake-up overlaps the peer's work
    (void)!write(l.wake.get(), &one, sizeof(one));
  }
  if (!sent.value() || q.PeekIssue() != nullptr) q.Ring();  // left, or queued behind ours
}

Result<bool> StreamChannel::SendItem(Lane& l, const WorkItem& w, bool if_room) {
  const Request& r = *w.req;
  const ChunkPlan& c = r.chunks[w.chunk];
  FrameHeader h{};
  h.ticket = l.sent;
  uint32_t n = c.seg_end - c.seg_begin;
  iovec* v = l.send_iov.data();
  auto send = [&](int count) -> Result<bool> {
    if (if_room) return SendIovIfRoom(l.fd.get(), v, count, DeadlineIn(io_timeout_));
    KVLANE_RETURN_IF_ERROR(SendIov(l.fd.get(), v, count));
    return true;
  };
  if (w.canceled) {  // canceled before start: a nop keeps the reply order
    h.type = static_cast<uint8_t>(FrameType::kNop);
    v[0] = {&h, sizeof(h)};
    return send(1);
  }
  h.type = static_cast<uint8_t>(r.op == Op::kWrite ? FrameType::kWrite : FrameType::kRead);
  h.nseg = n;
  h.bytes = c.bytes;
  bool cma = mode_ == PayloadMode::kCma;
  for (uint32_t k = 0; k < n; ++k) {
    const Segment& s = r.segs[c.seg_begin + k];
    l.segs[k] = {s.remote_key, s.remote_addr, s.len, cma ? s.local_addr : 0};
  }
  // One sendmsg: header, segment table and (tcp WRITE) the payload gathered
  // straight from registered memory.
  v[0] = {&h, sizeof(h)};
  v[1] = {l.segs.data(), n * sizeof(WireSeg)};
  int count = 2;
  if (!cma && r.op == Op::kWrite && r.local_kind == MemoryKind::kCuda) {
    KVLANE_RETURN_IF_ERROR(SendStaged(l, *w.req, c, h, v));  // never if_room (FrameBytes)
    return true;
  }
  if (!cma && r.op == Op::kWrite) {
    for (uint32_t k = 0; k < n; ++k) {
      const Segment& s = r.segs[c.seg_begin + k];
      v[count++] = {reinterpret_cast<void*>(s.local_addr), s.len};
    }
  }
  return send(count);
}

Status StreamChannel::SendStaged(Lane& l, Request& r, const ChunkPlan& c, const FrameHeader& h,
                                 iovec* v) {
  const uint32_t n = c.seg_end - c.seg_begin;
  for (uint32_t k = 0; k < n; ++k) {
    const Segment& s = r.segs[c.seg_begin + k];
    v[2 + k] = {reinterpret_cast<void*>(s.local_addr), s.len};
  }
  // A chunk of a post that already failed (another chunk's staging) moves nothing.
  Status primed = r.error.load(std::memory_order_acquire) != 0
                      ? Status::Canceled("an earlier chunk of this post failed")
                      : Status::Ok();
  std::optional<StagedSender> sender;
  if (primed.ok()) {
    Result<DeviceCopier*> copier = CopierIn(l.send_copier, v[2].iov_base, staging_copy_);
    primed = copier.ok() ? sender.emplace(**copier, std::span(v + 2, n)).Prime() : copier.status();
  }
  if (!primed.ok()) {
    r.SetError(primed);  // nothing of this chunk went out: the post fails, the lane goes on
    FrameHeader nop{};
    nop.type = static_cast<uint8_t>(FrameType::kNop);
    nop.ticket = h.ticket;
    return SendAll(l.fd.get(), &nop, sizeof(nop));
  }
  Status copy;
  KVLANE_RETURN_IF_ERROR(sender->Send(l.fd.get(), v, 2, &copy));
  if (!copy.ok()) r.SetError(copy);  // the target got filler: the post fails, the lane goes on
  return Status::Ok();
}

// A Kick holds the mutex for one small inline send, microseconds, so the
// sender first retries for up to `spin_` (yielding, in case the Kick's thread
// waits for this CPU): then it almost never sleeps on the mutex, and the Kick's
// unlock, on the posting thread's fast path, stays a plain store instead of a
// futex wake-up. A Kick that takes longer (finishing a frame the peer is slow
// to read, up to io_timeout) is waited for blocked, not by yielding in a loop,
// which kept a CPU busy for as long.
std::unique_lock<std::mutex> StreamChannel::LockIssue(Lane& l) {
  std::unique_lock lock(l.issue_mu, std::try_to_lock);
  if (lock.owns_lock()) return lock;
  for (auto until = std::chrono::steady_clock::now() + spin_;
       std::chrono::steady_clock::now() < until;) {
    std::this_thread::yield();
    if (lock.try_lock()) return lock;
  }
  lock.lock();
  return lock;
}

void StreamChannel::Send(int i) {
  Lane& l = *lanes_[i];
  LaneQueue& q = queue(i);
  while (!closing().load(std::memory_order_acquire) && !latch().latched()) {
    if (q.PeekIssue() == nullptr) {
      q.WaitForIssue(spin_);
      continue;
    }
    std::unique_lock lock = LockIssue(l);
    // A wait for a Kick may have outlasted the channel: it latched, or Close began.
    if (closing().load(std::memory_order_acquire) || latch().latched()) continue;
    WorkItem* w = q.PeekIssue();  // nullptr: the poster sent it
    if (w == nullptr) continue;
    l.sending.store(true, std::memory_order_release);
    Result<bool> s = Issue(i, l, *w, /*if_room=*/false);
    l.sending.store(false, std::memory_order_release);
    if (!s.ok()) {
      Fail(i, s.status());
      break;
    }
  }
  // The receiver owns the retire cursor until it is done; then we drain. A
  // Kick already sending finishes first (the lock); later ones see the latch
  // or closing and send nothing.
  // Blocks (no spin): on shm the receiver may wait for the target up to
  // 2 x io_timeout + 1 s (AwaitTargetDone).
  l.receiver_done.wait(false, std::memory_order_acquire);
  Status why = latch().latched() ? latch().Get() : Status::Canceled("channel closed");
  for (;;) {
    {
      std::lock_guard lock(l.issue_mu);
      DrainLane(i, why);
    }
    if (closing().load(std::memory_order_acquire)) break;
    q.WaitForIssue(spin_);
  }
  std::lock_guard lock(l.issue_mu);
  DrainLane(i, why);
}

namespace {

// The message below names the target's staging caps (a peer of this build).
static_assert(kMaxStagingCopiers == 256 && kMaxStagingCopiersPerPeer == 128);

// What a target's error code in a reply says, for the initiator's message.
const char* PeerErrorWhy(int32_t status, PayloadMode mode) {
  if (status != static_cast<int32_t>(Code::kNotAllowed)) return "reported by the peer";
  if (mode == PayloadMode::kCma)
    return "the peer refused the access (outside its registered piece, a WRITE into a read-only "
           "piece, or the kernel forbids it to copy this process's memory: shm needs both "
           "processes run by one user, this one dumpable, and Yama's ptrace_scope 0 (or the "
           "target this process's ancestor under 1); else enable tcp for this peer)";
  return "the peer refused the access (outside its registered piece, a WRITE into a "
         "read-only piece, or, for its GPU's memory, no staging buffer left: 256 per process, "
         "128 for one peer name's connections)";
}

}  // namespace

Status StreamChannel::ReceiveOne(Lane& l, int i) {
  const Deadline by = DeadlineIn(2 * io_timeout_);  // the socket is readable: the reply began
  ReplyHeader r{};
  KVLANE_RETURN_IF_ERROR(RecvAll(l.fd.get(), &r, sizeof(r), by));
  LaneQueue& q = queue(i);
  WorkItem* w = q.PeekRetire();
  // The sender advances the issue cursor just after its sendmsg returns, and the
  // reply can beat it here: wait for it, bounded (a reply for nothing sent is a
  // protocol violation). Yielding for up to `spin_`, and then Backoff::kYields
  // times more, covers that race: the sender is a few instructions from its
  // store, so it usually lands within microseconds, and with spin 0 too (a
  // sleep at once cost at least the timer's slack, tens of microseconds, on a
  // reply that was already there). Past them the sender was descheduled, or the
  // peer sent a reply for nothing, and we sleep (10 us doubling to 1 ms) so that
  // such a peer cannot keep a CPU busy for io_timeout. (The clock is read only
  // in that race: the deadline above is the one read of every reply.)
  if (w == nullptr) {
    const auto start = std::chrono::steady_clock::now();
    Backoff backoff;
    while (w == nullptr && r.ticket == l.replied.load(std::memory_order_relaxed)) {
      const auto waited = std::chrono::steady_clock::now() - start;
      if (waited >= io_timeout_) break;
      if (waited < spin_) {
        std::this_thread::yield();
      } else {
        backoff.Pause();
      }
      w = q.PeekRetire();
    }
  }
  if (w == nullptr || r.ticket != l.replied.load(std::memory_order_relaxed))
    return Status::Backend("protocol: reply out of order");
  const Request& req = *w->req;
  const ChunkPlan& c = req.chunks[w->chunk];
  Status s;
  if (w->canceled) {
    s = Status::Canceled("canceled before start");
  } else if (r.status != 0) {
    s = PeerStatus(r.status, PeerErrorWhy(r.status, mode_));
  }
  if (r.flags & ~kReplyStatusAfter) return Status::Backend("protocol: unknown reply flags");
  if (r.bytes != 0) {
    // Only a READ's reply carries a payload: one sent to a WRITE would land in
    // the WRITE's source, memory the request only reads (perhaps read-only).
    if (!s.ok() || req.op != Op::kRead || r.bytes != c.bytes)
      return Status::Backend("protocol: unexpected payload");
    KVLANE_RETURN_IF_ERROR(ReceivePayload(l, req, c, r, &s, by));
  } else if (r.flags != 0) {
    return Status::Backend("protocol: a status trailer without a payload");
  } else if (s.ok() && mode_ == PayloadMode::kInline && req.op == Op::kRead && c.bytes != 0) {
    // On tcp a READ's bytes come only in its reply: "done" without them
    // would retire the chunk ok (and send its notification) with nothing read.
    return Status::Backend("protocol: a READ's reply without its payload");
  }
  // Release: a poster that reads every frame answered (Kick) sends after this.
  l.replied.store(l.replied.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  RetireHead(i, s);
  return Status::Ok();
}

// A tcp READ payload: scattered straight into local host memory, or staged
// into device memory. With kReplyStatusAfter, the target's verdict on the
// bytes follows them (a copy it failed after sending the header voids them).
Status StreamChannel::ReceivePayload(Lane& l, const Request& req, const ChunkPlan& c,
                                     const ReplyHeader& r, Status* s, Deadline by) {
  const uint32_t n = c.seg_end - c.seg_begin;
  for (uint32_t k = 0; k < n; ++k) {
    const Segment& sg = req.segs[c.seg_begin + k];
    l.recv_iov[k] = {reinterpret_cast<void*>(sg.local_addr), sg.len};
  }
  if (req.local_kind == MemoryKind::kCuda) {
    KVLANE_RETURN_IF_ERROR(ReceiveStaged(l, n, r.bytes, s, by));
  } else {
    KVLANE_RETURN_IF_ERROR(RecvIov(l.fd.get(), l.recv_iov.data(), static_cast<int>(n), by));
  }
  if (!(r.flags & kReplyStatusAfter)) return Status::Ok();
  StatusTrailer t{};
  KVLANE_RETURN_IF_ERROR(RecvAll(l.fd.get(), &t, sizeof(t), by));
  if (t.status != 0 && s->ok())
    *s = PeerStatus(t.status, "the peer failed to copy the data it sent (device memory)");
  return Status::Ok();
}

Status StreamChannel::ReceiveStaged(Lane& l, uint32_t n, uint64_t bytes, Status* copy,
                                    Deadline by) {
  Result<DeviceCopier*> copier = CopierIn(l.recv_copier, l.recv_iov[0].iov_base, staging_copy_);
  if (!copier.ok()) {
    *copy = copier.status();
    return Discard(l.fd.get(), bytes, by);  // keeps the stream framed
  }
  return RecvStaged(**copier, l.fd.get(), std::span(l.recv_iov.data(), n), copy, by);
}

Status StreamChannel::AwaitReply(Lane& l, bool busy, std::chrono::milliseconds timeout) {
  if (busy && spin_.count() > 0) {
    for (auto until = std::chrono::steady_clock::now() + spin_;
         std::chrono::steady_clock::now() < until;) {
      pollfd p{l.fd.get(), POLLIN, 0};
      if (poll(&p, 1, 0) != 0) return Status::Ok();  // readable, or an error the read reports
    }
  }
  l.receiver_asleep.store(true, std::memory_order_seq_cst);
  pollfd p[2] = {{l.fd.get(), POLLIN, 0}, {l.wake.get(), POLLIN, 0}};
  const int rc = PollFor(p, 2, timeout);
  l.receiver_asleep.store(false, std::memory_order_relaxed);
  if (rc < 0) return ErrnoStatus("poll", errno);
  if (p[0].revents != 0) return Status::Ok();
  if (p[1].revents != 0) {
    uint64_t n = 0;
    (void)!read(l.wake.get(), &n, sizeof(n));
    return Status::InProgress();
  }
  return Status::Timeout("no data from peer within the I/O timeout");
}

void StreamChannel::Receive(int i) {
  Lane& l = *lanes_[i];
  LaneQueue& q = queue(i);
  auto last = std::chrono::steady_clock::now();
  while (!closing().load(std::memory_order_acquire) && !latch().latched()) {
    // A frame stuck in its send counts too: the peer reads nothing, and only
    // Fail's shutdown ends that send.
    bool busy = q.HasUnretired() || l.sending.load(std::memory_order_acquire);
    Status s = AwaitReply(l, busy, busy ? io_timeout_ : std::chrono::milliseconds(1000));
    if (s.in_progress()) continue;  // woken: a frame went out, spin for its reply
    if (s.code() == Code::kTimeout) {
      if (busy && std::chrono::steady_clock::now() - last >= io_timeout_) {
        Fail(i, Status::Timeout("peer sent nothing for the whole io_timeout"));
        break;
      }
      if (!busy) last = std::chrono::steady_clock::now();
      continue;
    }
    if (s.ok()) s = ReceiveOne(l, i);
    if (!s.ok()) {
      Fail(i, s);
      break;
    }
    last = std::chrono::steady_clock::now();
  }
  Status why = latch().latched() ? latch().Get() : Status::Canceled("channel closed");
  // shm: the target copies into (READ) and out of (WRITE) this process's memory
  // itself, so a frame sent and not answered is the target's until it lets go of
  // the connection. Its requests end only then: else the caller could free or
  // reuse memory the target still writes, or post again and be overtaken by the
  // old copy. A target that does not let go leaves them poisoned (their memory
  // must stay: DeregisterMemory says so, and their slots are never reused).
  bool held = false;
  if (mode_ == PayloadMode::kCma) {
    // Our side may still be open (a latch set directly, without Fail): the
    // target closes only once it reads our end of file. After the shutdown no
    // send succeeds, so the frames sent are counted under the issue lock: a
    // sender between its send and its count (AdvanceIssue) is waited for.
    shutdown(l.fd.get(), SHUT_WR);
    bool unanswered;
    {
      std::lock_guard lock(l.issue_mu);
      unanswered = q.HasUnretired();
    }
    if (unanswered) held = !AwaitTargetDone(l);
  }
  if (held)
    why = Status(why.code(), why.message() + "; the shm target did not close the lane within " +
                                 std::to_string(kTargetDoneFactor) + " x io_timeout + " +
                                 std::to_string(kTargetDoneSlack.count()) +
                                 " s, so it may still copy this transfer's memory: keep it");
  while (q.HasUnretired()) {
    if (held) q.PeekRetire()->req->poisoned.store(true, std::memory_order_release);
    RetireHead(i, why);
  }
  l.receiver_done.store(true, std::memory_order_release);
  l.receiver_done.notify_all();
  q.Wake();
}

Status StreamChannel::Notify(std::string_view bytes) {
  std::lock_guard lock(control_mu_);
  KVLANE_RETURN_IF_ERROR(latch().Get());
  FrameHeader h{};
  h.type = static_cast<uint8_t>(FrameType::kNotify);
  h.bytes = bytes.size();
  iovec v[2] = {{&h, sizeof(h)}, {const_cast<char*>(bytes.data()), bytes.size()}};
  // No send starts later than io_timeout (the most a target takes to read a
  // frame), so a peer that takes the bytes slowly, never still for the socket's
  // io_timeout, cannot stretch the call either.
  Status s = SendIov(control_.get(), v, 2, DeadlineIn(io_timeout_));
  ReplyHeader r{};
  if (s.ok()) s = WaitReadable(control_.get(), io_timeout_);
  // Bounded as a lane's reply (ReceiveOne), however the peer paces its bytes.
  if (s.ok()) s = RecvAll(control_.get(), &r, sizeof(r), DeadlineIn(io_timeout_));
  if (!s.ok()) {
    Fail(0, s);
    // What Fail latched: kCanceled once Close began (a Notify after Close's
    // shutdown gets EPIPE; one in flight holds control_mu_, which Close waits for),
    // else this error, or a lane's that came first.
    return latch().Get();
  }
  if (r.bytes != 0 || r.flags != 0) {
    // An acknowledgement is a bare header: bytes after it would be read as
    // the next notification's, and every later one would be out of step.
    s = Status::Backend("protocol: a notification's acknowledgement with a payload or flags");
    Fail(0, s);
    return latch().Get();
  }
  if (r.status != 0) return RefusedNotification(r.status);
  return Status::Ok();
}

void StreamChannel::StopLanes() {
  BeginClose();  // before the shutdown: a lane call failing on it then ends canceled (Fail)
  ShutLanes();
}

void StreamChannel::Close() {
  std::call_once(close_once_, [this] {
    StopLanes();
    for (auto& l : lanes_) {
      if (l->receiver.joinable()) l->receiver.join();
      if (l->sender.joinable()) l->sender.join();
    }
    std::lock_guard lock(control_mu_);
    if (control_.valid()) shutdown(control_.get(), SHUT_RDWR);
  });
}

}  // namespace kvlane::core
