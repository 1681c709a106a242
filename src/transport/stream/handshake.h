// The kvlane handshake (wire.h), run on a fresh connection before anything else:
// tcp and shm connections, and the cuda transport's control socket. The target
// sends a challenge, the initiator answers with a Hello that proves it holds the
// target's secret, and the target's reply proves the same the other way. The
// secret never travels; both proofs cover both fresh nonces, so a captured Hello
// or reply is refused on any other connection.
//
// Thread-safety: free functions; each call uses only its own fd (or HelloIo).
#pragma once

#include <poll.h>
#include <sys/uio.h>

#include <chrono>
#include <string>
#include <string_view>

#include "core/metadata.h"
#include "transport/peer_conn_limit.h"
#include "transport/stream/fd_passing.h"
#include "transport/stream/wire.h"
#include "transport/transport.h"

namespace kvlane::core {

// How one handshake moves its bytes, each call bounded as its transport wants:
// the stream transports by the socket's timeouts, step by step; the cuda
// control socket by one deadline for the whole exchange.
class HelloIo {
 public:
  virtual ~HelloIo() = default;
  // Every byte of iov[0..n); may modify iov.
  virtual Status Send(iovec* iov, int n) = 0;
  // Exactly `len` bytes.
  virtual Status Recv(void* buf, size_t len) = 0;
  // Until the peer's next message begins; kTimeout when it does not in time.
  virtual Status WaitReadable() = 0;
};

// A handshake's I/O on `fd`: the whole exchange ends by one deadline, so a
// peer that trickles bytes or stalls half way cannot stretch it (a socket
// timeout restarts at every byte). A descriptor sent along is closed.
class DeadlineIo final : public HelloIo {
 public:
  DeadlineIo(int fd, Deadline by) : fd_(fd), by_(by) {}
  Status Send(iovec* iov, int n) override { return SendIovBy(fd_, iov, n, -1, by_); }
  Status Recv(void* buf, size_t len) override { return RecvWithFd(fd_, buf, len, nullptr, by_); }
  Status WaitReadable() override { return WaitFor(fd_, POLLIN, by_); }

 private:
  const int fd_;
  const Deadline by_;
};

// Target side. A Hello that passes its checks is admitted by `limit` under the
// initiator's name before the reply goes. On success returns the initiator's
// slot (its name: Slot::peer()), which the caller holds while it serves the
// connection; on refusal the initiator was sent kNotAllowed (and why:
// HelloRefusal), NotAllowed is returned and the caller closes the connection.
// Out of memory counting the slot: kBackend, sent and returned alike.
Result<PeerConnLimit::Slot> AcceptHello(const AgentContext& ctx, HelloIo& io, PeerConnLimit& limit);
// The same on a stream connection, within connect_timeout (DeadlineIo).
Result<PeerConnLimit::Slot> AcceptHello(const AgentContext& ctx, int fd, PeerConnLimit& limit);

// Initiator side, as `self_name`, on a connection to `peer` (its name, agent_id
// and secret are used). NotAllowed when the target refuses our Hello (saying
// when it did so because our name holds its max_conns_per_peer) or cannot
// prove it holds peer.secret; NotSupported when it speaks another wire version;
// Timeout or RemoteDisconnect when no challenge comes, saying why: none in
// time, a clean close (hinting at the target's reasons), or the connection's
// own error (a reset, a timeout of tcp keepalive or TCP_USER_TIMEOUT).
Status SayHello(std::string_view self_name, const AgentMeta& peer, ConnRole role, HelloIo& io);
// The same on a stream connection, ending by `by` (DeadlineIo: the caller's
// deadline for the whole connect, e.g. a channel's open); fd is left without
// I/O timeouts on success.
Status SayHello(const AgentContext& ctx, const AgentMeta& peer, int fd, ConnRole role, Deadline by);

}  // namespace kvlane::core
