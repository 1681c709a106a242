// Socket helpers for the stream transports (tcp, shm's unix control sockets).
// Every call retries EINTR and turns failures into Status.
#pragma once

#include <poll.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <chrono>
#include <cstdint>
#include <string>

#include "kvlane/status.h"

namespace kvlane::core {

// Owns a file descriptor.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { Reset(); }
  Fd(Fd&& o) noexcept : fd_(o.Release()) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      Reset();
      fd_ = o.Release();
    }
    return *this;
  }
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int Release() { return std::exchange(fd_, -1); }
  void Reset();

 private:
  int fd_ = -1;
};

using Deadline = std::chrono::steady_clock::time_point;
inline constexpr Deadline kNoDeadline = Deadline::max();

// `timeout` from now.
inline Deadline DeadlineIn(std::chrono::milliseconds timeout) {
  return std::chrono::steady_clock::now() + timeout;
}

// The calls below block (each send or receive bounded by the socket's own
// timeout: SetIoTimeout). `by`: no send or receive starts after it (kTimeout),
// so a peer that trickles its bytes, each within the socket timeout, cannot
// stretch the call past `by` plus one socket timeout.
//
// A failed send or receive (errno `err`) as a Status: kRemoteDisconnect when the
// peer closed or reset the connection or stopped answering (ETIMEDOUT: tcp
// keepalive or TCP_USER_TIMEOUT gave up; EHOSTUNREACH and the like), each
// named as such; kTimeout for the socket's own timeout (EAGAIN: SetIoTimeout);
// else kBackend.
Status IoError(const char* what, int err);
// The peer ended the stream cleanly (a receive read end of file: it closed or
// shut down its side): kRemoteDisconnect, which the receive calls below and
// RecvWithFd return for it. IsPeerClosed tells it from the errors IoError
// names (a reset, a timeout), which are kRemoteDisconnect too.
Status PeerClosed();
bool IsPeerClosed(const Status& s);

// Writes every byte of `iov[0..n)`; may modify iov. kRemoteDisconnect on EOF/EPIPE.
Status SendIov(int fd, struct iovec* iov, int n, Deadline by = kNoDeadline);
// SendIov, except that it returns false at once, having sent nothing, when the
// socket has no room for a first byte (a blocking socket included); true once
// every byte is sent. A frame it started ends by `by` (kTimeout after it, the
// stream then cut mid-frame), whatever the socket's own send timeout.
Result<bool> SendIovIfRoom(int fd, struct iovec* iov, int n, Deadline by);
Status SendAll(int fd, const void* buf, size_t len, Deadline by = kNoDeadline);
// Reads exactly the bytes of iov[0..n) (scatter); may modify iov.
Status RecvIov(int fd, struct iovec* iov, int n, Deadline by = kNoDeadline);
Status RecvAll(int fd, void* buf, size_t len, Deadline by = kNoDeadline);
// Reads and drops `len` bytes.
Status Discard(int fd, uint64_t len, Deadline by = kNoDeadline);
// Bounds each blocking send/recv on fd by `timeout` (SO_SNDTIMEO / SO_RCVTIMEO);
// a call that times out without moving a byte fails with kTimeout (one that
// moved some returns them, and the helpers above go on: see `by`). 0: none.
Status SetIoTimeout(int fd, std::chrono::milliseconds timeout);
// The same for receives only (SO_RCVTIMEO).
Status SetRecvTimeout(int fd, std::chrono::milliseconds timeout);
// poll(fds, n) for at most `timeout` in all (negative: forever): a call
// interrupted by a signal goes on with the time left, not a fresh timeout.
int PollFor(struct pollfd* fds, int n, std::chrono::milliseconds timeout);
// Waits until fd is readable. kTimeout after `timeout` (negative: forever).
Status WaitReadable(int fd, std::chrono::milliseconds timeout);

Result<Fd> ListenTcp(const std::string& host, uint16_t port, uint16_t* bound_port);
// A blocking connected socket. The connect ends by `by` (kTimeout after it);
// resolving `host` (a name, not an address) is not bounded by it.
// RemoteDisconnect when refused or unresolvable.
Result<Fd> ConnectTcp(const std::string& host, uint16_t port, Deadline by);
// The same, ending `timeout` from now.
Result<Fd> ConnectTcp(const std::string& host, uint16_t port, std::chrono::milliseconds timeout);
// Abstract-namespace unix sockets (name without the leading NUL).
Result<Fd> ListenUnix(const std::string& name);
// A blocking socket connected to the listener at `name`. While the listener's
// accept queue is full (a flood of connections, a listener that stopped
// accepting) it tries again with a fresh socket, napping, until `by`: then
// kTimeout, as a connect that did not complete in time. RemoteDisconnect when
// no one listens there.
Result<Fd> ConnectUnix(const std::string& name, Deadline by);
// The same, ending `timeout` from now.
Result<Fd> ConnectUnix(const std::string& name, std::chrono::milliseconds timeout);
// The process at the other end of a unix socket (SO_PEERCRED: for a
// connecting end, the listener's creator); uid uid_t(-1) when unknown.
ucred PeerCred(int fd);
// Accepts one connection; kCanceled when the listener was shut down.
Result<Fd> Accept(int listen_fd);

// Splits "host:port" ("[v6]:port" too).
Status SplitHostPort(const std::string& hp, std::string* host, uint16_t* port);

}  // namespace kvlane::core
