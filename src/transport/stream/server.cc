#include "transport/stream/server.h"

#include <sys/socket.h>
#include <unistd.h>

#include <new>

#include "transport/stream/fd_passing.h"
#include "transport/stream/frame_exec.h"
#include "transport/stream/handshake.h"
#include "transport/stream/keepalive.h"

namespace kvlane::core {
void StreamServer::Serve(Conn* c) {
  int fd = c->fd.get();
  // An unauthenticated peer gets connect_timeout to answer our challenge; after it, a
  // frame that stalls half way fails after io_timeout (it may hold the registry
  // lock, which DeregisterMemory waits for).
  Status s = SetIoTimeout(fd, ctx_->options.connect_timeout);
  // tcp: a peer whose host vanishes between frames ends the connection (idle
  // between frames has no deadline) once keepalive gives up on it.
  if (s.ok() && mode_ == PayloadMode::kInline) s = SetKeepalive(fd, KeepaliveFor(ctx_->options));
  // shm: CMA reaches the initiator's memory, so only our own uid may use it.
  ucred cred = mode_ == PayloadMode::kCma ? PeerCred(fd) : ucred{};
  if (s.ok() && mode_ == PayloadMode::kCma && cred.uid != geteuid())
    s = Status::NotAllowed("shm peer runs under another uid");
  if (s.ok()) {
    // Out of memory on this thread (a notification's payload, a peer's name)
    // drops this connection, not the process: std::terminate would end every
    // other peer's transfers too. Everything Run holds is RAII.
    try {
      Run(fd, cred.pid);
    } catch (const std::bad_alloc&) {
    }
  }
  // The peer's slot is free before it sees the close: it may reconnect at once.
  shutdown(fd, SHUT_RDWR);
  if (mode_ == PayloadMode::kCma) DrainQueued(fd);  // unix: descriptors it may have sent
  conns_.Finish(c);
}

void StreamServer::Run(int fd, pid_t pid) {
  Result<PeerConnLimit::Slot> peer = AcceptHello(*ctx_, fd, *peer_conns_);
  if (peer.ok() && SetIoTimeout(fd, ctx_->options.io_timeout).ok()) {
    FrameExecutor exec(ctx_, mode_, fd, pid, peer->peer());
    (void)exec.Run();  // ends on disconnect, protocol violation or stall
  }
}

}  // namespace kvlane::core
