#include "transport/stream/server.h"

#include <sys/socket.h>
#include <unistd.h>

#include "transport/stream/frame_check.h"
#include "transport/stream/frame_exec.h"
#include "transport/stream/wire.h"

namespace kvlane::core {
namespace {

// Reads and checks the Hello. On success returns the initiator's name.
Result<std::string> Handshake(const AgentContext& ctx, int fd) {
  HelloFrame h{};
  KVLANE_RETURN_IF_ERROR(RecvAll(fd, &h, sizeof(h)));
  Status ok = CheckHello(h, ctx.agent_id, ctx.secret);
  std::string name(h.name_len, '\0');
  if (ok.ok()) KVLANE_RETURN_IF_ERROR(RecvAll(fd, name.data(), name.size()));
  HelloReply reply{static_cast<int32_t>(ok.code()), 0};
  KVLANE_RETURN_IF_ERROR(SendAll(fd, &reply, sizeof(reply)));
  KVLANE_RETURN_IF_ERROR(ok);
  return name;
}

ucred PeerCred(int fd) {
  ucred cred{};
  cred.uid = static_cast<uid_t>(-1);
  socklen_t len = sizeof(cred);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return ucred{0, static_cast<uid_t>(-1), 0};
  return cred;
}

}  // namespace

void StreamServer::Serve(Conn* c) {
  int fd = c->fd.get();
  // An unauthenticated peer gets connect_timeout to say Hello; after it, a
  // frame that stalls half way fails after io_timeout (it may hold the registry
  // lock, which DeregisterMemory waits for).
  Status s = SetIoTimeout(fd, ctx_->options.connect_timeout);
  // shm: CMA reaches the initiator's memory, so only our own uid may use it.
  ucred cred = mode_ == PayloadMode::kCma ? PeerCred(fd) : ucred{};
  if (s.ok() && mode_ == PayloadMode::kCma && cred.uid != geteuid())
    s = Status::NotAllowed("shm peer runs under another uid");
  Result<std::string> name = s.ok() ? Handshake(*ctx_, fd) : Result<std::string>(s);
  if (name.ok() && SetIoTimeout(fd, ctx_->options.io_timeout).ok()) {
    FrameExecutor exec(ctx_, mode_, fd, cred.pid, name.value());
    (void)exec.Run();  // ends on disconnect, protocol violation or stall
  }
  shutdown(fd, SHUT_RDWR);
  conns_.Finish(c);
}

}  // namespace kvlane::core
