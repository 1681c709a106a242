#include "transport/cuda/cuda_control.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <new>
#include <string>

#include "transport/cuda/fanout_send.h"
#include "transport/stream/handshake.h"

namespace kvlane::core {

Status SendCtl(int fd, CtlType type, uint64_t seq, const void* payload, uint32_t len,
               Deadline deadline) {
  CtlFrame f{static_cast<uint32_t>(type), len, seq};
  iovec v[2] = {{&f, sizeof(f)}, {const_cast<void*>(payload), len}};
  return SendIovBy(fd, v, len == 0 ? 1 : 2, -1, deadline);
}

uint32_t CtlPayloadLimit(uint32_t type) {
  switch (static_cast<CtlType>(type)) {
    case CtlType::kNotify:
      return static_cast<uint32_t>(kMaxNotifyBytes);
    case CtlType::kRevoke:
      return kMaxCtlPayload;
    case CtlType::kFdRequest:
      return 64;  // sizeof(FdRequest): a malformed one of a few bytes more gets a reply
    case CtlType::kFdReply:
      return kMaxFdReplyText;
    case CtlType::kLiveCheck:
      return kMaxCtlPayload;  // initiators before session 27 asked up to 131,072 keys at once
    case CtlType::kLiveReply:
      return kMaxLiveKeys * 8;  // never more than the check asked about
    default:
      return 0;  // kNotifyAck, kRevokeAck; an unknown type is refused once read
  }
}

Status RecvCtlBy(int fd, CtlFrame* f, std::string* payload, Deadline by) {
  KVLANE_RETURN_IF_ERROR(RecvWithFd(fd, f, sizeof(*f), nullptr, by));
  if (f->len > CtlPayloadLimit(f->type))
    return Status::Backend("control: a frame of type " + std::to_string(f->type) + " announces " +
                           std::to_string(f->len) + " bytes, more than it may carry");
  payload->resize(f->len);
  return RecvWithFd(fd, payload->data(), f->len, nullptr, by);
}

Status RecvCtl(int fd, CtlFrame* f, std::string* payload, std::chrono::milliseconds timeout) {
  KVLANE_RETURN_IF_ERROR(WaitFor(fd, POLLIN, kNoDeadline));
  return RecvCtlBy(fd, f, payload, DeadlineIn(timeout));
}

Status AwaitLiveReply(int fd, uint64_t seq, Deadline by,
                      const std::function<Status(const std::string& keys, uint64_t seq)>& on_revoke,
                      std::string* gone) {
  for (;;) {
    CtlFrame f{};
    std::string payload;
    KVLANE_RETURN_IF_ERROR(RecvCtlBy(fd, &f, &payload, by));
    const bool keyed = payload.size() % 8 == 0;
    if (f.type == static_cast<uint32_t>(CtlType::kRevoke) && keyed) {
      KVLANE_RETURN_IF_ERROR(on_revoke(payload, f.seq));
      continue;
    }
    if (f.type != static_cast<uint32_t>(CtlType::kLiveReply) || f.seq != seq || !keyed)
      return Status::Backend("cuda control: protocol violation (live-key check)");
    *gone = std::move(payload);
    return Status::Ok();
  }
}

std::string ControlSocketName(uint64_t agent_id) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "kvlane-cuda-%016llx", static_cast<unsigned long long>(agent_id));
  return buf;
}

Result<Fd> DialControl(const std::string& self_name, std::chrono::milliseconds connect_timeout,
                       const AgentMeta& peer, const std::string& socket) {
  const Deadline by = DeadlineIn(connect_timeout);
  KVLANE_ASSIGN_OR_RETURN(Fd fd, ConnectUnix(socket, by));  // one deadline: connect and hello
  KVLANE_RETURN_IF_ERROR(SetIoTimeout(fd.get(), connect_timeout));
  DeadlineIo io(fd.get(), by);
  KVLANE_RETURN_IF_ERROR(SayHello(self_name, peer, ConnRole::kCudaControl, io));
  return fd;
}

Result<Fd> DialControl(const AgentContext& ctx, const AgentMeta& peer, const std::string& socket) {
  if (socket != ControlSocketName(peer.agent_id))
    return Status::NotAllowed("peer '" + peer.name + "' announces a control socket not its own");
  return DialControl(ctx.name, ctx.options.connect_timeout, peer, socket);
}

Status ControlServer::Start(const std::string& socket) {
  KVLANE_ASSIGN_OR_RETURN(Fd listener, ListenUnix(socket));
  return conns_.Start(std::move(listener), [this](Conn* c) { Serve(c); });
}

void ControlServer::Serve(Conn* c) {
  const int fd = c->fd.get();
  // Out of memory on this thread (a notification's payload, a frame's keys)
  // drops this connection, not the process (as StreamServer::Serve). Run holds
  // nothing but RAII. The peer's slot is free before it sees the close: it may
  // reconnect at once.
  try {
    Run(c);
  } catch (const std::bad_alloc&) {
  }
  shutdown(fd, SHUT_RDWR);
  DrainQueued(fd);  // descriptors the peer may have sent
  {
    std::unique_lock lock(conns_.mu());
    c->leaving = true;  // Revoke pins no more, and stops waiting for this one
    conns_.cv().notify_all();
    conns_.cv().wait(lock, [&] { return c->pins == 0; });  // bounded: see Revoke
  }
  conns_.Finish(c);
}

namespace {
constexpr size_t kKeptPayload = 64u << 10;
}  // namespace

void ControlServer::Run(Conn* c) {
  const int fd = c->fd.get();
  // Every call below is bounded by a deadline of its own: the Hello by
  // connect_timeout, a frame once begun and each reply by io_timeout; an
  // authenticated connection may idle between frames. The socket timeouts
  // are a second line only.
  DeadlineIo io(fd, DeadlineIn(ctx_->options.connect_timeout));
  Result<PeerConnLimit::Slot> peer = AcceptHello(*ctx_, io, *peer_conns_);
  if (!peer.ok() || !SetIoTimeout(fd, ctx_->options.io_timeout).ok()) return;
  {
    std::lock_guard lock(conns_.mu());
    c->authed = true;
  }
  CtlFrame f{};
  std::string payload;
  while (RecvCtl(fd, &f, &payload, ctx_->options.io_timeout).ok() &&
         Handle(c, peer->peer(), f, payload)) {
    // A large frame's buffer goes with it: an idle connection keeps at most
    // kKeptPayload, not the largest frame it ever sent (up to 1 MiB).
    if (payload.capacity() > kKeptPayload) std::string().swap(payload);
  }
}

bool ControlServer::Handle(Conn* c, const std::string& name, const CtlFrame& f,
                           const std::string& payload) {
  switch (static_cast<CtlType>(f.type)) {
    case CtlType::kNotify: {
      // The sender caps notifications as the stream transports do: a larger one is hostile.
      if (payload.size() > kMaxNotifyBytes) return false;
      // The initiator's data landed before it sent this. The ack carries the
      // queue's verdict (its code, two's complement, in seq).
      const Status queued = ctx_->notifs->Push({name, payload});
      const auto verdict = static_cast<uint32_t>(static_cast<int32_t>(queued.code()));
      std::lock_guard w(c->write_mu);
      return SendCtl(c->fd.get(), CtlType::kNotifyAck, verdict, nullptr, 0,
                     DeadlineIn(ctx_->options.io_timeout))
          .ok();
    }
    case CtlType::kRevokeAck:
      return Acknowledged(c, f.seq);
    case CtlType::kFdRequest:
      return ServeFd(c, payload).ok();
    case CtlType::kLiveCheck:
      return payload.size() % 8 == 0 && ServeLiveCheck(c, f.seq, payload).ok();
    default:
      return false;  // protocol violation: drop the connection
  }
}

// Served on the connection's thread, which marked it authenticated before
// reading any frame: a revocation after the registry lookup below reaches this
// connection, one before it is in the answer.
Status ControlServer::ServeLiveCheck(Conn* c, uint64_t seq, const std::string& keys) {
  std::vector<uint64_t> asked(keys.size() / 8);
  std::memcpy(asked.data(), keys.data(), asked.size() * 8);
  // One look under the registry's lock for all of them (not a lock per key,
  // each behind any registration waiting for it).
  const std::vector<bool> live = ctx_->registry->Live(asked);
  std::string gone;
  for (size_t i = 0; i < asked.size(); ++i)
    if (!live[i]) gone.append(keys, i * 8, 8);
  std::lock_guard w(c->write_mu);
  return SendCtl(c->fd.get(), CtlType::kLiveReply, seq, gone.data(),
                 static_cast<uint32_t>(gone.size()), DeadlineIn(ctx_->options.io_timeout));
}

bool ControlServer::Acknowledged(Conn* c, uint64_t seq) {
  std::lock_guard lock(conns_.mu());
  if (seq > c->sent) return false;  // would pass for revocations it has not seen
  c->acked = std::max(c->acked, seq);
  conns_.cv().notify_all();
  return true;
}

namespace {

// `keys` as whole kRevoke frames (header and payload each), numbered from `seq`.
std::string RevokeFrames(std::span<const uint64_t> keys, uint64_t seq) {
  std::string frames;
  for (size_t at = 0; at < keys.size(); at += kMaxRevokeKeys, ++seq) {
    const auto n = static_cast<uint32_t>(std::min<size_t>(kMaxRevokeKeys, keys.size() - at));
    const CtlFrame f{static_cast<uint32_t>(CtlType::kRevoke), n * 8, seq};
    frames.append(reinterpret_cast<const char*>(&f), sizeof(f));
    frames.append(reinterpret_cast<const char*>(keys.data() + at), n * 8);
  }
  return frames;
}

}  // namespace

void ControlServer::Revoke(std::span<const uint64_t> keys) {
  if (keys.empty()) return;
  std::lock_guard one(revoke_mu_);
  const uint64_t frames = (keys.size() + kMaxRevokeKeys - 1) / kMaxRevokeKeys;
  const uint64_t first = revoke_seq_ + 1;
  revoke_seq_ += frames;
  std::vector<Conn*> to;
  {
    std::lock_guard lock(conns_.mu());
    if (conns_.stopped()) return;
    for (auto& c : conns_.conns()) {
      // A connection still in its Hello gets none (see Conn::authed): nor does
      // one accepted after this snapshot, which revocation never covered.
      if (c->done || c->leaving || !c->authed) continue;
      ++c->pins;              // keeps it (and its fd) alive while unlocked below
      c->sent = revoke_seq_;  // before the send: the ack may come back at once
      to.push_back(c.get());
    }
  }
  // Sent without conns_.mu(), to every connection side by side by one
  // deadline: a peer that stops reading holds up no other's send.
  const std::string bytes = RevokeFrames(keys, first);
  std::vector<FanoutTarget> targets;
  targets.reserve(to.size());
  for (Conn* c : to) targets.push_back({c->fd.get(), &c->write_mu});
  const std::vector<bool> whole = FanoutSend(targets, bytes, DeadlineIn(ctx_->options.io_timeout));
  for (size_t i = 0; i < to.size(); ++i)
    if (!whole[i]) shutdown(to[i]->fd.get(), SHUT_RDWR);  // not told: it cannot confirm
  WaitAcks(to, revoke_seq_);
}

void ControlServer::WaitAcks(const std::vector<Conn*>& to, uint64_t seq) {
  std::unique_lock lock(conns_.mu());
  auto settled = [&](const Conn* c) { return c->leaving || c->acked >= seq; };
  conns_.cv().wait_until(lock, DeadlineIn(ctx_->options.io_timeout), [&] {
    return conns_.stopped() || std::all_of(to.begin(), to.end(), settled);
  });
  for (Conn* c : to) {
    if (!settled(c)) shutdown(c->fd.get(), SHUT_RDWR);  // cannot confirm: loses its connection
    --c->pins;
  }
  conns_.cv().notify_all();  // a leaving connection's thread waits for its pins to go
}

}  // namespace kvlane::core
