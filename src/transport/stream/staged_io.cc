#include "transport/stream/staged_io.h"

#include <algorithm>

#include "transport/stream/socket.h"

namespace kvlane::core {
namespace {

uint64_t Total(std::span<const iovec> ranges) {
  uint64_t n = 0;
  for (const iovec& r : ranges) n += r.iov_len;
  return n;
}

}  // namespace

Status RangeCursor::Queue(DeviceCopier& c, int h, bool to_host, size_t cap, size_t* took) {
  size_t at = 0;
  *took = 0;
  while (at < cap && i_ < ranges_.size()) {
    const iovec& r = ranges_[i_];
    const size_t n = std::min(cap - at, r.iov_len - off_);
    uint8_t* dev = static_cast<uint8_t*>(r.iov_base) + off_;
    KVLANE_RETURN_IF_ERROR(to_host ? c.ToHost(h, at, dev, n) : c.ToDevice(h, at, dev, n));
    at += n;
    off_ += n;
    if (off_ == r.iov_len) ++i_, off_ = 0;
  }
  *took = at;
  return c.Flush(h);
}

StagedSender::StagedSender(DeviceCopier& c, std::span<const iovec> ranges)
    : c_(c), at_(ranges), total_(Total(ranges)) {}

StagedSender::~StagedSender() { Drain(); }

Status StagedSender::Fill(int h) {
  queued_[h] = true;  // even when it fails part-way: what it queued runs
  return at_.Queue(c_, h, /*to_host=*/true, c_.capacity(), &bytes_[h]);
}

Status StagedSender::Wait(int h) {
  queued_[h] = false;
  return c_.Wait(h);
}

void StagedSender::Drain() {
  for (int h = 0; h < DeviceCopier::kHalves; ++h)
    if (queued_[h]) (void)Wait(h);
}

Status StagedSender::Prime() {
  Status s = Fill(0);
  if (s.ok()) s = Wait(0);
  if (s.ok() && !at_.done()) s = Fill(1);
  if (!s.ok()) Drain();
  return s;
}

Status StagedSender::Send(int fd, const iovec* head, int n, Status* copy_error, Deadline by) {
  iovec v[3];
  std::copy(head, head + n, v);
  v[n] = {c_.half(0), bytes_[0]};
  KVLANE_RETURN_IF_ERROR(SendIov(fd, v, n + 1, by));
  uint64_t left = total_ - bytes_[0];
  for (int h = 1; left != 0; h ^= 1) {
    // Half h holds the next window once its copies finish; half h^1 is free
    // (its bytes are in the socket), so the window after goes there meanwhile.
    // After a copy error the halves' bytes are filler.
    if (copy_error->ok()) *copy_error = Wait(h);
    if (copy_error->ok() && !at_.done()) {
      *copy_error = Fill(h ^ 1);
      if (!copy_error->ok()) Drain();
    }
    const size_t bytes = std::min<uint64_t>(c_.capacity(), left);
    KVLANE_RETURN_IF_ERROR(SendAll(fd, c_.half(h), bytes, by));
    left -= bytes;
  }
  return Status::Ok();
}

Status RecvStaged(DeviceCopier& c, int fd, std::span<const iovec> ranges, Status* copy_error,
                  Deadline by) {
  uint64_t left = Total(ranges);
  RangeCursor at(ranges);
  bool pending[DeviceCopier::kHalves] = {};
  auto settle = [&](int h) {
    if (!pending[h]) return;
    pending[h] = false;
    Status s = c.Wait(h);
    if (!s.ok() && copy_error->ok()) *copy_error = s;
  };
  Status socket;
  for (int h = 0; left != 0 && socket.ok(); h ^= 1) {
    settle(h);  // its earlier copies still read it
    const size_t n = std::min<uint64_t>(c.capacity(), left);
    socket = RecvAll(fd, c.half(h), n, by);
    left -= n;
    if (!socket.ok() || !copy_error->ok()) continue;  // keep reading: the stream stays framed
    size_t took = 0;
    pending[h] = true;
    Status q = at.Queue(c, h, /*to_host=*/false, n, &took);
    if (!q.ok()) *copy_error = q;
  }
  for (int h = 0; h < DeviceCopier::kHalves; ++h) settle(h);
  return socket;
}

}  // namespace kvlane::core
