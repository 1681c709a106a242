#include "transport/cuda/cuda_control.h"

#include <sys/socket.h>

#include <algorithm>

#include "transport/stream/wire.h"

namespace kvlane::core {

Status SendCtl(int fd, CtlType type, uint64_t seq, const void* payload, uint32_t len) {
  CtlFrame f{static_cast<uint32_t>(type), len, seq};
  iovec v[2] = {{&f, sizeof(f)}, {const_cast<void*>(payload), len}};
  return SendIov(fd, v, len == 0 ? 1 : 2);
}

Status RecvCtl(int fd, CtlFrame* f, std::string* payload) {
  KVLANE_RETURN_IF_ERROR(RecvAll(fd, f, sizeof(*f)));
  if (f->len > kMaxCtlPayload) return Status::Backend("control: frame too large");
  payload->resize(f->len);
  if (f->len != 0) KVLANE_RETURN_IF_ERROR(RecvAll(fd, payload->data(), f->len));
  return Status::Ok();
}

Result<Fd> DialControl(const std::string& self_name, std::chrono::milliseconds connect_timeout,
                       const AgentMeta& peer, const std::string& socket) {
  KVLANE_ASSIGN_OR_RETURN(Fd fd, ConnectUnix(socket, connect_timeout));
  HelloFrame h{};
  h.magic = kHelloMagic;
  h.version = kWireVersion;
  h.role = static_cast<uint8_t>(ConnRole::kControl);
  h.name_len = static_cast<uint8_t>(self_name.size());
  h.target_id = peer.agent_id;
  std::copy(peer.secret.begin(), peer.secret.end(), h.secret);
  iovec v[2] = {{&h, sizeof(h)}, {const_cast<char*>(self_name.data()), self_name.size()}};
  KVLANE_RETURN_IF_ERROR(SendIov(fd.get(), v, 2));
  KVLANE_RETURN_IF_ERROR(WaitReadable(fd.get(), connect_timeout));
  HelloReply r{};
  KVLANE_RETURN_IF_ERROR(RecvAll(fd.get(), &r, sizeof(r)));
  if (r.status != 0) return Status::NotAllowed("peer '" + peer.name + "' refused our hello (stale metadata?)");
  return fd;
}

namespace {

// Reads and checks the Hello; returns the initiator's name.
Result<std::string> Handshake(const AgentContext& ctx, int fd) {
  KVLANE_RETURN_IF_ERROR(WaitReadable(fd, ctx.options.connect_timeout));
  HelloFrame h{};
  KVLANE_RETURN_IF_ERROR(RecvAll(fd, &h, sizeof(h)));
  Secret got{};
  std::copy(std::begin(h.secret), std::end(h.secret), got.begin());
  bool ok = h.magic == kHelloMagic && h.version == kWireVersion && h.target_id == ctx.agent_id &&
            SecretEquals(got, ctx.secret) && h.name_len > 0;
  std::string name(h.name_len, '\0');
  if (ok) KVLANE_RETURN_IF_ERROR(RecvAll(fd, name.data(), name.size()));
  HelloReply reply{static_cast<int32_t>(ok ? Code::kOk : Code::kNotAllowed), 0};
  KVLANE_RETURN_IF_ERROR(SendAll(fd, &reply, sizeof(reply)));
  if (!ok) return Status::NotAllowed("hello rejected: wrong agent id, secret or version");
  return name;
}

}  // namespace

Status ControlServer::Start(const std::string& socket) {
  KVLANE_ASSIGN_OR_RETURN(Fd listener, ListenUnix(socket));
  conns_.Start(std::move(listener), [this](Conn* c) { Serve(c); });
  return Status::Ok();
}

void ControlServer::Serve(Conn* c) {
  int fd = c->fd.get();
  // An unauthenticated peer gets connect_timeout to say Hello; an authenticated
  // control connection is idle most of its life, so no timeout after it.
  Status timed = SetIoTimeout(fd, ctx_->options.connect_timeout);
  auto name = timed.ok() ? Handshake(*ctx_, fd) : Result<std::string>(timed);
  if (name.ok() && !SetIoTimeout(fd, std::chrono::milliseconds(0)).ok()) name = Status::Backend("control: socket options");
  CtlFrame f{};
  std::string payload;
  while (name.ok() && RecvCtl(fd, &f, &payload).ok()) {
    if (f.type == static_cast<uint32_t>(CtlType::kNotify)) {
      // The initiator's data landed before it sent this. The ack carries the
      // queue's verdict (its code, two's complement, in seq).
      const Status queued = ctx_->notifs->Push({name.value(), payload});
      const auto verdict = static_cast<uint32_t>(static_cast<int32_t>(queued.code()));
      std::lock_guard w(c->write_mu);
      if (!SendCtl(fd, CtlType::kNotifyAck, verdict, nullptr, 0).ok()) break;
    } else if (f.type == static_cast<uint32_t>(CtlType::kRevokeAck)) {
      std::lock_guard lock(conns_.mu());
      c->acked = std::max(c->acked, f.seq);
      conns_.cv().notify_all();
    } else if (f.type == static_cast<uint32_t>(CtlType::kFdRequest)) {
      if (!ServeFd(c, payload).ok()) break;
    } else {
      break;  // protocol violation: drop the connection
    }
  }
  shutdown(fd, SHUT_RDWR);
  conns_.Finish(c);
}

void ControlServer::Revoke(std::span<const uint64_t> keys) {
  std::unique_lock lock(conns_.mu());
  auto& conns = conns_.conns();
  if (conns_.stopped() || conns.empty()) return;
  uint64_t seq = 0;
  for (size_t at = 0; at < keys.size(); at += kMaxRevokeKeys) {
    uint32_t n = static_cast<uint32_t>(std::min<size_t>(kMaxRevokeKeys, keys.size() - at));
    seq = ++revoke_seq_;
    for (auto& c : conns) {
      if (c->done) continue;
      std::lock_guard w(c->write_mu);
      if (!SendCtl(c->fd.get(), CtlType::kRevoke, seq, keys.data() + at, n * 8).ok())
        shutdown(c->fd.get(), SHUT_RDWR);
    }
  }
  auto deadline = std::chrono::steady_clock::now() + ctx_->options.io_timeout;
  auto all_acked = [&] {
    return std::all_of(conns.begin(), conns.end(), [&](auto& c) { return c->done || c->acked >= seq; });
  };
  if (!conns_.cv().wait_until(lock, deadline, all_acked)) {
    for (auto& c : conns)  // an initiator that cannot confirm loses its connection
      if (!c->done && c->acked < seq) shutdown(c->fd.get(), SHUT_RDWR);
  }
}

}  // namespace kvlane::core
