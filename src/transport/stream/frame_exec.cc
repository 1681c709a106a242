#include "transport/stream/frame_exec.h"

#include <poll.h>
#include <sys/uio.h>

#include <chrono>

#include "core/sys.h"
#include "core/tsan.h"
#include "transport/stream/frame_check.h"
#include "transport/stream/staged_io.h"

namespace kvlane::core {

Status FrameExecutor::Run() {
  for (;;) {
    // Idle between frames may last as long as the peer answers (tcp: its kernel
    // answers keepalive; a socket that keepalive ended is readable and its read
    // fails); once a frame starts, it has io_timeout to be served, however its
    // bytes trickle (the socket's io timeout, set by the server, bounds each
    // read and write besides).
    KVLANE_RETURN_IF_ERROR(WaitReadable(fd_, std::chrono::milliseconds(-1)));
    by_ = DeadlineIn(ctx_->options.io_timeout);
    FrameHeader h{};
    KVLANE_RETURN_IF_ERROR(RecvAll(fd_, &h, sizeof(h), by_));
    // Protocol violations end the connection: the stream cannot be trusted after them.
    KVLANE_RETURN_IF_ERROR(CheckFrameHeader(h));
    switch (static_cast<FrameType>(h.type)) {
      case FrameType::kWrite: KVLANE_RETURN_IF_ERROR(Write(h)); break;
      case FrameType::kRead: KVLANE_RETURN_IF_ERROR(Read(h)); break;
      case FrameType::kNotify: KVLANE_RETURN_IF_ERROR(Notify(h)); break;
      case FrameType::kNop: KVLANE_RETURN_IF_ERROR(Reply(h.ticket, Status::Ok())); break;
    }
  }
}

Status FrameExecutor::ReadSegs(const FrameHeader& h) {
  segs_.resize(h.nseg);
  KVLANE_RETURN_IF_ERROR(RecvAll(fd_, segs_.data(), h.nseg * sizeof(WireSeg), by_));
  return CheckSegments(h, segs_);
}

Status FrameExecutor::Validate(Op op) {
  local_.clear();
  remote_.clear();
  device_ = false;
  for (size_t i = 0; i < segs_.size(); ++i) {
    const WireSeg& s = segs_[i];
    uint8_t* p = nullptr;
    MemoryKind kind = MemoryKind::kHost;
    KVLANE_RETURN_IF_ERROR(ctx_->registry->LookupLocked(s.key, s.addr, s.len, op, &p, &kind));
    const bool device = kind == MemoryKind::kCuda;
    if (i == 0) device_ = device;
    if (device != device_) return Status::InvalidArgument("a frame mixes host and device memory");
    local_.push_back({p, s.len});
    remote_.push_back({reinterpret_cast<void*>(s.peer_addr), s.len});
  }
  if (device_ && mode_ == PayloadMode::kCma)
    return Status::NotSupported("shm cannot reach device memory (use cuda or tcp)");
  return Status::Ok();
}

// Validate, and for a first device frame the copier, made without the
// registry lock (it may create a CUDA context: Deregister need not wait for
// that), then validated again.
Status FrameExecutor::Admit(Op op, Registry::SharedLock& lock) {
  KVLANE_RETURN_IF_ERROR(Validate(op));
  if (!device_ || copier_ != nullptr) return Status::Ok();
  lock.unlock();
  Result<std::unique_ptr<DeviceCopier>> made =
      MakeDeviceCopier(local_[0].iov_base, ctx_->options.staging_copy, peer_name_);
  lock.lock();
  KVLANE_RETURN_IF_ERROR(made.status());
  copier_ = std::move(made).value();
  return Validate(op);
}

// The payload lands in host halves and is copied on to the device; the reply
// goes once every copy finished (the data is visible on the device).
Status FrameExecutor::WriteStaged(const FrameHeader& h, Registry::SharedLock lock) {
  Status copy;
  Status s;
  {
    ScopedRemoteCopy remote;  // ordered by the peer, invisible to TSan (core/tsan.h)
    s = RecvStaged(*copier_, fd_, local_, &copy, by_);
  }
  lock.unlock();
  KVLANE_RETURN_IF_ERROR(s);  // stream broken
  return Reply(h.ticket, copy);
}

// The first window is staged before the reply header goes: a device error
// there is an error reply. A later one voids the payload: the rest goes as
// filler and the trailer after it says why (kReplyStatusAfter).
Status FrameExecutor::ReadStaged(const FrameHeader& h, Registry::SharedLock lock) {
  ScopedRemoteCopy remote;  // ordered by the peer, invisible to TSan (core/tsan.h)
  StagedSender sender(*copier_, local_);
  Status primed = sender.Prime();
  if (!primed.ok()) {
    lock.unlock();
    return Reply(h.ticket, primed);
  }
  ReplyHeader r{h.ticket, 0, kReplyStatusAfter, h.bytes};
  const iovec head{&r, sizeof(r)};
  Status copy;
  KVLANE_RETURN_IF_ERROR(sender.Send(fd_, &head, 1, &copy, by_));
  lock.unlock();
  const StatusTrailer t{static_cast<int32_t>(copy.code()), 0};
  return SendAll(fd_, &t, sizeof(t), by_);
}

Status FrameExecutor::CmaCopy(bool into_target) {
  // The initiator may have given up on the frame while it waited here (for
  // the registry lock): copy nothing then. Past the frame's deadline its lane
  // may have timed out; once it shut its end down (its lane failed or closed)
  // it is waiting for this connection to close, not for this copy.
  if (std::chrono::steady_clock::now() > by_)
    return Status::Timeout("shm: the frame waited past io_timeout; nothing copied");
  pollfd p{fd_, POLLRDHUP, 0};
  if (poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0)
    return Status::Canceled("shm: the initiator shut its end down; nothing copied");
  const uint64_t want = [&] {
    uint64_t n = 0;
    for (const iovec& v : local_) n += v.iov_len;
    return n;
  }();
  ssize_t got = into_target
                    ? process_vm_readv(peer_pid_, local_.data(), local_.size(), remote_.data(), remote_.size(), 0)
                    : process_vm_writev(peer_pid_, local_.data(), local_.size(), remote_.data(), remote_.size(), 0);
  if (got < 0) {
    if (errno == ESRCH) return Status::RemoteDisconnect("initiator process is gone");
    // The kernel refused this process access to the initiator's memory (ptrace
    // rules): a refusal, as the initiator reads it (kNotAllowed).
    if (errno == EPERM || errno == EACCES)
      return Status::NotAllowed("shm: the kernel refused cross-process copies with the initiator");
    return ErrnoStatus(into_target ? "process_vm_readv" : "process_vm_writev", errno);
  }
  if (static_cast<uint64_t>(got) != want) return Status::Backend("CMA copied a partial range");
  return Status::Ok();
}

Status FrameExecutor::Write(const FrameHeader& h) {
  KVLANE_RETURN_IF_ERROR(ReadSegs(h));
  auto lock = ctx_->registry->LockShared();  // Deregister waits for this copy
  // A read-only piece under any segment refuses the whole frame.
  Status v = Admit(Op::kWrite, lock);
  if (!v.ok()) {
    lock.unlock();
    if (mode_ == PayloadMode::kInline)
      KVLANE_RETURN_IF_ERROR(Discard(fd_, h.bytes, by_));  // keep framing
    return Reply(h.ticket, v);
  }
  if (device_) return WriteStaged(h, std::move(lock));
  Status s;
  {
    ScopedRemoteCopy remote;  // ordered by the peer, invisible to TSan (core/tsan.h)
    s = mode_ == PayloadMode::kInline
            ? RecvIov(fd_, local_.data(), static_cast<int>(local_.size()), by_)
            : CmaCopy(/*into_target=*/true);
  }
  lock.unlock();
  if (!s.ok() && mode_ == PayloadMode::kInline) return s;  // stream broken
  return Reply(h.ticket, s);
}

Status FrameExecutor::Read(const FrameHeader& h) {
  KVLANE_RETURN_IF_ERROR(ReadSegs(h));
  auto lock = ctx_->registry->LockShared();
  Status v = Admit(Op::kRead, lock);
  if (!v.ok()) {
    lock.unlock();
    return Reply(h.ticket, v);
  }
  if (device_) return ReadStaged(h, std::move(lock));
  ScopedRemoteCopy remote;  // ordered by the peer, invisible to TSan (core/tsan.h)
  if (mode_ == PayloadMode::kCma) {
    Status s = CmaCopy(/*into_target=*/false);
    lock.unlock();
    return Reply(h.ticket, s);
  }
  ReplyHeader r{h.ticket, 0, 0, h.bytes};
  local_.insert(local_.begin(), iovec{&r, sizeof(r)});
  return SendIov(fd_, local_.data(), static_cast<int>(local_.size()), by_);
}

Status FrameExecutor::Notify(const FrameHeader& h) {
  std::string bytes(h.bytes, '\0');
  KVLANE_RETURN_IF_ERROR(RecvAll(fd_, bytes.data(), bytes.size(), by_));
  return Reply(h.ticket, ctx_->notifs->Push({peer_name_, std::move(bytes)}));
}

Status FrameExecutor::Reply(uint64_t ticket, const Status& s) {
  ReplyHeader r{ticket, static_cast<int32_t>(s.code()), 0, 0};
  // A verdict reached past the frame's deadline (CmaCopy's kTimeout after a
  // wait for the registry lock) is still sent, one header with io_timeout of
  // its own: the initiator then reads why this chunk failed, not a connection
  // closed under every chunk of the lane.
  const Deadline by =
      std::chrono::steady_clock::now() > by_ ? DeadlineIn(ctx_->options.io_timeout) : by_;
  return SendAll(fd_, &r, sizeof(r), by);
}

}  // namespace kvlane::core
