// Handing a VMM allocation's file descriptor to an authenticated peer: the
// request (initiator side, on a connection of its own) and the answer (target
// side, on the control server's connection thread).
#include <algorithm>
#include <cstring>

#include "core/peer_code.h"
#include "core/plain_text.h"
#include "transport/cuda/cuda_control.h"
#include "transport/stream/fd_passing.h"

namespace kvlane::core {
namespace {

// Reads one frame by `by`; an fd that rides on its header lands in `*fd`.
Status RecvCtlWithFd(int sock, CtlFrame* f, std::string* payload, Fd* fd, Deadline by) {
  KVLANE_RETURN_IF_ERROR(RecvWithFd(sock, f, sizeof(*f), fd, by));
  if (f->len > CtlPayloadLimit(f->type)) return Status::Backend("control: frame too large");
  payload->resize(f->len);
  return RecvWithFd(sock, payload->data(), f->len, nullptr, by);  // only the header carries one
}

Result<Fd> FromReply(const FdPeer& p, const CtlFrame& f, const std::string& text, Fd fd) {
  const int32_t raw = static_cast<int32_t>(f.seq);
  if (raw == 0 && fd.valid()) return fd;
  if (raw == 0)
    return Status::Backend("peer '" + p.peer.name + "' answered without a file descriptor");
  const Code code = PeerErrorCode(raw).value_or(Code::kBackend);
  return Status(code, "peer '" + p.peer.name + "' refused a VMM allocation's file descriptor: " +
                          PlainTextOf(text.substr(0, size_t{kMaxFdReplyText})));
}

}  // namespace

Result<Fd> FetchPeerFd(const FdPeer& p, uint64_t key, uint32_t index) {
  if (p.cancel != nullptr && p.cancel->load(std::memory_order_acquire))
    return Status::Canceled("channel closed");
  const auto left =
      std::chrono::floor<std::chrono::milliseconds>(p.deadline - std::chrono::steady_clock::now());
  if (left.count() <= 0)
    return Status::Timeout("peer '" + p.peer.name + "' is too slow handing out VMM allocations");
  KVLANE_ASSIGN_OR_RETURN(
      Fd sock, DialControl(p.self_name, std::min(p.connect_timeout, left), p.peer, p.socket));
  KVLANE_RETURN_IF_ERROR(SetIoTimeout(sock.get(), p.io_timeout));
  const Deadline by = std::min(DeadlineIn(p.io_timeout), p.deadline);
  FdRequest req{key, index, 0};
  KVLANE_RETURN_IF_ERROR(SendCtl(sock.get(), CtlType::kFdRequest, 0, &req, sizeof(req), by));
  for (;;) {
    CtlFrame f{};
    std::string payload;
    Fd fd;
    Status s = RecvCtlWithFd(sock.get(), &f, &payload, &fd, by);
    if (s.code() == Code::kTimeout)
      return Status::Timeout("peer '" + p.peer.name + "' did not answer an fd request");
    KVLANE_RETURN_IF_ERROR(s);
    if (f.type == static_cast<uint32_t>(CtlType::kRevoke)) {
      // A revocation raced with the request: nothing was launched through this
      // connection, so confirm at once (the channel's own connection gets it too).
      KVLANE_RETURN_IF_ERROR(SendCtl(sock.get(), CtlType::kRevokeAck, f.seq, nullptr, 0, by));
      continue;
    }
    if (f.type != static_cast<uint32_t>(CtlType::kFdReply))
      return Status::Backend("cuda control: protocol violation by peer '" + p.peer.name + "'");
    return FromReply(p, f, payload, std::move(fd));
  }
}

// Any request gets a reply; only a failed (or timed-out) send ends the connection.
Status ControlServer::ServeFd(Conn* c, const std::string& request) {
  Result<Fd> fd = Status::InvalidArgument("malformed fd request");
  FdRequest req{};
  if (request.size() == sizeof(req)) {
    std::memcpy(&req, request.data(), sizeof(req));
    if (req.reserved == 0)
      fd = fds_ ? fds_(req.key, req.index)
                : Result<Fd>(Status::NotSupported("this agent hands out no fds"));
  }
  std::lock_guard w(c->write_mu);
  const Deadline by = DeadlineIn(ctx_->options.io_timeout);  // a peer that does not read is cut
  if (fd.ok()) {
    CtlFrame f{static_cast<uint32_t>(CtlType::kFdReply), 0, 0};
    return SendWithFd(c->fd.get(), &f, sizeof(f), fd->get(), by);
  }
  const std::string& m = fd.status().message();
  uint64_t status = static_cast<uint32_t>(static_cast<int32_t>(fd.status().code()));
  return SendCtl(c->fd.get(), CtlType::kFdReply, status, m.data(),
                 static_cast<uint32_t>(std::min(m.size(), size_t{kMaxFdReplyText})), by);
}

}  // namespace kvlane::core
