#include "transport/stream/staged_io.h"

#include <algorithm>

#include "transport/stream/socket.h"

namespace kvlane::core {

Status RangeCursor::Queue(DeviceCopier& c, int h, bool to_host, size_t cap, size_t* took) {
  size_t at = 0;
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
  return Status::Ok();
}

Status StagedSender::Prime() {
  KVLANE_RETURN_IF_ERROR(at_.Queue(c_, 0, /*to_host=*/true, c_.capacity(), &first_));
  return c_.Wait(0);
}

Status StagedSender::Send(int fd, const iovec* head, int n) {
  iovec v[3];
  std::copy(head, head + n, v);
  v[n] = {c_.half(0), first_};
  size_t next = 0;
  if (!at_.done()) KVLANE_RETURN_IF_ERROR(at_.Queue(c_, 1, true, c_.capacity(), &next));
  KVLANE_RETURN_IF_ERROR(SendIov(fd, v, n + 1));
  for (int h = 1; next != 0; h ^= 1) {
    // Half h holds `next` bytes once its copies finish; half h^1 is free again
    // (its bytes are in the socket), so the window after it goes there meanwhile.
    KVLANE_RETURN_IF_ERROR(c_.Wait(h));
    const size_t bytes = next;
    next = 0;
    if (!at_.done()) KVLANE_RETURN_IF_ERROR(at_.Queue(c_, h ^ 1, true, c_.capacity(), &next));
    KVLANE_RETURN_IF_ERROR(SendAll(fd, c_.half(h), bytes));
  }
  return Status::Ok();
}

Status RecvStaged(DeviceCopier& c, int fd, std::span<const iovec> ranges, Status* copy_error) {
  uint64_t left = 0;
  for (const iovec& r : ranges) left += r.iov_len;
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
    socket = RecvAll(fd, c.half(h), n);
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
