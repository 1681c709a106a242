// StreamChannel: the initiator side of tcp and shm. Each lane is one connection
// with a sender thread (issues frames in ticket order) and a receiver thread
// (reads replies and retires tickets FIFO). A separate control connection
// carries notifications.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/device_copier.h"
#include "transport/stream/server.h"
#include "transport/stream/socket.h"
#include "transport/stream/wire.h"

namespace kvlane::core {

// Opens one authenticated connection to the peer: its connect and handshake
// end by `by` (kTimeout after it).
using Dialer = std::function<Result<Fd>(ConnRole role, Deadline by)>;

class StreamChannel final : public Channel {
 public:
  // Dials one control connection and lanes_per_peer lane connections, one
  // after another, each (its connect and its handshake together) within
  // connect_timeout: at most (lanes_per_peer + 1) x connect_timeout in all, which
  // the caller spends holding the peer's refresh_mu.
  static Result<std::unique_ptr<Channel>> Open(const AgentContext& ctx, PayloadMode mode,
                                               const char* name, const Dialer& dial);
  ~StreamChannel() override { Close(); }

  const char* transport() const override { return name_; }
  Status Notify(std::string_view bytes) override;
  void Close() override;
  // Shuts the lanes down without joining their threads: each shm receiver then
  // waits for its target to let go (AwaitTargetDone) while the owner stops the
  // agent's other channels, so an agent's end waits for all its shm targets at
  // once, at most one kTargetDoneFactor x io_timeout + kTargetDoneSlack, not one
  // per channel in turn. Close() joins. Idempotent.
  void StopLanes() override;
  // Sends the lane's head frame on the posting thread when it is small and
  // every earlier frame of the lane was answered (AgentOptions::post_inline_bytes).
  void Kick(int lane) override;
  bool kick_rings() const override { return inline_bytes_ != 0; }
  // Frames a posting thread sent itself (Kick) since Open, over all lanes: what
  // tests and diagnostics read to tell an inline post from the sender thread's.
  uint64_t inline_frames() const { return inline_frames_.load(std::memory_order_relaxed); }

 private:
  struct Lane {
    Fd fd;
    std::thread sender, receiver;
    std::atomic<bool> receiver_done{false};
    // Held while sending frames: by the sender thread, or by a posting thread
    // in Kick. It guards the issue cursor's use, `sent` and the send scratch.
    std::mutex issue_mu;
    std::vector<WireSeg> segs;    // send scratch
    std::vector<iovec> send_iov;  // send scratch
    std::vector<iovec> recv_iov;  // receiver scratch
    uint64_t sent = 0;            // tickets sent
    // The sender thread is inside a frame's send: the receiver counts the lane
    // as busy, so a peer that stops reading fails it after io_timeout.
    std::atomic<bool> sending{false};
    std::atomic<uint64_t> replied{0};  // tickets retired (written by the receiver only)
    // Wakes the receiver from its poll when a posting thread sent a frame
    // (Kick): it then spins on the socket for the reply instead of sleeping
    // until the reply wakes it. An eventfd; `receiver_asleep` says whether
    // writing it is worth a syscall (a wake-up lost to the race only costs the
    // old path: the reply itself ends the poll).
    Fd wake;
    std::atomic<bool> receiver_asleep{false};
    // Staging of local device memory (tcp), made at its first use.
    std::unique_ptr<DeviceCopier> send_copier;  // sender's (WRITE payload)
    std::unique_ptr<DeviceCopier> recv_copier;  // receiver's (READ payload)
  };
  StreamChannel(const AgentContext& ctx, PayloadMode mode, const char* name);
  void Send(int i);
  // The sender thread's hold of l.issue_mu: spins up to `spin_` while a Kick
  // holds it, then blocks.
  std::unique_lock<std::mutex> LockIssue(Lane& l);
  void Receive(int i);
  // Sends item `w` (the lane's head) and advances the issue cursor.
  // REQUIRES: l.issue_mu held. With `if_room`, false when the socket had no
  // room for its first byte: nothing was sent, `w` stays the head.
  Result<bool> Issue(int i, Lane& l, WorkItem& w, bool if_room);
  Result<bool> SendItem(Lane& l, const WorkItem& w, bool if_room);
  // Bytes the frame of `w` puts on the wire, or UINT64_MAX when its payload is
  // staged through device copies (never sent inline).
  uint64_t FrameBytes(const WorkItem& w) const;
  // A WRITE from local device memory: staged, then sent. An error before any
  // byte went out fails the request only (a nop keeps the reply order).
  // v[0..1]: the frame's header and segment table.
  Status SendStaged(Lane& l, Request& r, const ChunkPlan& c, const FrameHeader& h, iovec* v);
  // Reads one reply and retires its ticket. No receive of it starts later than
  // 2 x io_timeout after its first byte (the most a target takes to serve a
  // frame), and each is bounded by the socket's io_timeout (socket.h), so a peer
  // that trickles a reply cannot hold the lane, its requests, and a
  // DeregisterMemory waiting for them, past 3 x io_timeout: kTimeout.
  Status ReceiveOne(Lane& l, int i);
  // Until the lane's socket is readable (ok), `timeout` passes (kTimeout), or a
  // posting thread woke the receiver (kInProgress). Spins up to `spin` first
  // while the lane has a frame awaiting its reply.
  Status AwaitReply(Lane& l, bool busy, std::chrono::milliseconds timeout);
  // A READ reply's payload into local device memory: *copy gets a staging error.
  // No receive starts after `by`.
  Status ReceivePayload(Lane& l, const Request& req, const ChunkPlan& c, const ReplyHeader& r,
                        Status* s, Deadline by);
  // l.recv_iov[0..n) holds the device ranges. No receive starts after `by`.
  Status ReceiveStaged(Lane& l, uint32_t n, uint64_t bytes, Status* copy, Deadline by);
  // Latches `s` (kCanceled instead once Close began) and wakes every lane.
  void Fail(int i, const Status& s);
  // Ends every lane's sends (a send blocked in the kernel fails: EPIPE) and
  // wakes its receiver. tcp shuts both directions; shm only ours, so that a
  // receiver can still see the target close its end (AwaitTargetDone).
  void ShutLanes();
  // shm, after ShutLanes: true once the target closed lane `l` (end of file or
  // reset). Its server thread closes a connection only after its frame loop,
  // which our shutdown ends once the frames it holds are served (or refused:
  // past its io_timeout it copies nothing), so it then no longer touches this
  // process's memory for them. False when that took longer than
  // kTargetDoneFactor x io_timeout + kTargetDoneSlack (a target stuck in a copy,
  // or one with a far longer io_timeout). Replies read meanwhile are dropped.
  bool AwaitTargetDone(Lane& l);
  static constexpr int kTargetDoneFactor = 2;
  static constexpr std::chrono::seconds kTargetDoneSlack{1};

  const PayloadMode mode_;
  const char* name_;
  const std::chrono::microseconds spin_;
  const std::chrono::milliseconds io_timeout_;
  const StagingCopy staging_copy_;  // how device payloads are staged
  const uint32_t max_segs_;
  const uint64_t inline_bytes_;  // AgentOptions::post_inline_bytes
  std::atomic<uint64_t> inline_frames_{0};
  std::vector<std::unique_ptr<Lane>> lanes_;
  std::mutex control_mu_;
  Fd control_;  // GUARDED_BY(control_mu_)
  std::once_flag close_once_;
};

}  // namespace kvlane::core
