#include "transport/stream/server.h"

#include <sys/socket.h>

#include "transport/stream/frame_exec.h"
#include "transport/stream/wire.h"

namespace kvlane::core {
namespace {

// Reads and checks the Hello. On success returns the initiator's name.
Result<std::string> Handshake(const AgentContext& ctx, int fd) {
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

pid_t PeerPid(int fd) {
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return 0;
  return cred.pid;
}

}  // namespace

void StreamServer::Start(Fd listener) {
  listener_ = std::move(listener);
  accept_thread_ = std::thread([this] { AcceptLoop(); });
}

void StreamServer::AcceptLoop() {
  for (;;) {
    auto fd = Accept(listener_.get());
    std::lock_guard lock(mu_);
    if (stopped_) return;
    if (!fd.ok()) {
      if (fd.status().code() == Code::kCanceled) return;
      continue;  // transient accept failure (EMFILE, ...): keep serving
    }
    // Reap finished connections so long-running servers do not accumulate them.
    for (auto it = conns_.begin(); it != conns_.end();) {
      if ((*it)->done.load()) {
        (*it)->thread.join();
        it = conns_.erase(it);
      } else {
        ++it;
      }
    }
    auto c = std::make_unique<Conn>();
    c->fd = std::move(fd).value();
    Conn* raw = c.get();
    c->thread = std::thread([this, raw] { Serve(raw); });
    conns_.push_back(std::move(c));
  }
}

void StreamServer::Serve(Conn* c) {
  int fd = c->fd.get();
  auto name = Handshake(*ctx_, fd);
  if (name.ok()) {
    pid_t pid = mode_ == PayloadMode::kCma ? PeerPid(fd) : 0;
    FrameExecutor exec(ctx_, mode_, fd, pid, name.value());
    (void)exec.Run();  // ends on disconnect or protocol violation
  }
  shutdown(fd, SHUT_RDWR);
  c->done.store(true);
}

void StreamServer::Stop() {
  {
    std::lock_guard lock(mu_);
    if (stopped_) return;
    stopped_ = true;
    if (listener_.valid()) shutdown(listener_.get(), SHUT_RDWR);
    for (auto& c : conns_) shutdown(c->fd.get(), SHUT_RDWR);
  }
  if (accept_thread_.joinable()) accept_thread_.join();
  for (auto& c : conns_) c->thread.join();
  conns_.clear();
}

}  // namespace kvlane::core
