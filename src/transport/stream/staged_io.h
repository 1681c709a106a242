// The payload of a tcp frame in device memory: moved through a DeviceCopier's
// two host halves, one half on the wire while the other is being copied.
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <span>

#include "core/device_copier.h"
#include "transport/stream/socket.h"

namespace kvlane::core {

// Walks byte ranges in order, a window at a time.
class RangeCursor {
 public:
  explicit RangeCursor(std::span<const iovec> ranges) : ranges_(ranges) {}
  bool done() const { return i_ == ranges_.size(); }
  // Queues the next (at most) `cap` bytes as copies between half `h` and the
  // ranges (`to_host`: ranges -> half), starts them (DeviceCopier::Flush) and
  // advances past them; sets *took. On error some of them may be queued.
  Status Queue(DeviceCopier& c, int h, bool to_host, size_t cap, size_t* took);

 private:
  std::span<const iovec> ranges_;
  size_t i_ = 0;    // current range
  size_t off_ = 0;  // bytes of it already taken
};

// Sends device ranges: Prime(), then Send(). Its destructor waits for copies
// still queued (an error path), so the ranges and halves are let go of when it
// is gone.
class StagedSender {
 public:
  StagedSender(DeviceCopier& c, std::span<const iovec> ranges);
  ~StagedSender();
  StagedSender(const StagedSender&) = delete;
  StagedSender& operator=(const StagedSender&) = delete;

  // Copies the first window into half 0 and waits for it, then queues the
  // second into half 1. An error here leaves the stream untouched (nothing was
  // sent) and no copy running.
  Status Prime();
  // Sends head[0..n) (n <= 2) and the first window in one sendmsg, then every
  // later window, each copied while the one before it is on the wire. A copy
  // that fails after the head went out does not break the stream: the rest of
  // the promised bytes go out as filler and the error lands in *copy_error (the
  // caller tells the peer those bytes are void). The returned status is the
  // socket's: an error there leaves the stream broken.
  // No send starts after `by` (socket.h).
  // REQUIRES: Prime() returned ok.
  Status Send(int fd, const iovec* head, int n, Status* copy_error, Deadline by = kNoDeadline);

 private:
  Status Fill(int h);  // queues the next window into half h
  Status Wait(int h);
  void Drain();

  DeviceCopier& c_;
  RangeCursor at_;
  uint64_t total_ = 0;
  size_t bytes_[DeviceCopier::kHalves] = {};
  bool queued_[DeviceCopier::kHalves] = {};
};

// Receives exactly the bytes of `ranges` from `fd` into device memory. The
// socket is read to the end even after a copy fails, so the stream stays
// framed: a socket error is the returned status (the stream is broken), the
// first copy error goes to *copy_error. Every copy has finished on return. No
// receive starts after `by` (socket.h).
Status RecvStaged(DeviceCopier& c, int fd, std::span<const iovec> ranges, Status* copy_error,
                  Deadline by = kNoDeadline);

}  // namespace kvlane::core
