#include "transport/stream/socket.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>

#include "core/backoff.h"
#include "core/sys.h"

namespace kvlane::core {
namespace {

timeval ToTimeval(std::chrono::milliseconds t) {
  return {static_cast<time_t>(t.count() / 1000), static_cast<suseconds_t>(t.count() % 1000 * 1000)};
}

// Drops `done` bytes from the front of iov[*first..n); *first then names the
// first entry with bytes left (empty entries are stepped over too).
void Advance(struct iovec* iov, int n, int* first, size_t done) {
  while (*first < n && done >= iov[*first].iov_len) done -= iov[(*first)++].iov_len;
  if (*first < n) {
    iov[*first].iov_base = static_cast<char*>(iov[*first].iov_base) + done;
    iov[*first].iov_len -= done;
  }
}

// kTimeout once `by` has passed.
Status CheckDeadline(Deadline by) {
  if (by != kNoDeadline && std::chrono::steady_clock::now() >= by)
    return Status::Timeout("the peer did not finish within the deadline (I/O timeout)");
  return Status::Ok();
}

// Waits up to 1 s for room to send on `fd`, but not past `by` (kTimeout once
// it passed). The deadline is compared exactly; only poll's wait is in
// milliseconds, rounded up so that a remainder under 1 ms waits rather than
// spins or ends early. No retry here on EINTR: the caller tries again and
// comes back, so a stream of signals cannot stretch the wait past `by`.
Status AwaitRoomBy(int fd, Deadline by) {
  const auto left = by - std::chrono::steady_clock::now();
  if (left <= std::chrono::steady_clock::duration::zero())
    return Status::Timeout("the peer stopped reading in the middle of a frame");
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(left);
  pollfd p{fd, POLLOUT, 0};
  const int prc = poll(&p, 1, static_cast<int>(std::min<int64_t>(ms.count(), 1000)));
  if (prc < 0 && errno != EINTR) return ErrnoStatus("poll", errno);
  return Status::Ok();
}

void SetNoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

// What poll may wait before `by`, rounded up to whole milliseconds (a
// remainder under 1 ms waits rather than spins); -1: no deadline; 0: passed.
int PollMsUntil(Deadline by) {
  if (by == kNoDeadline) return -1;
  const auto left =
      std::chrono::ceil<std::chrono::milliseconds>(by - std::chrono::steady_clock::now());
  return static_cast<int>(std::clamp<int64_t>(left.count(), 0, INT_MAX));
}

// Until the non-blocking connect in progress on `fd` completed (or failed);
// kTimeout once `by` passed. EINTR polls again, never past `by`.
Status WaitConnected(int fd, Deadline by) {
  for (;;) {
    const int ms = PollMsUntil(by);
    if (ms == 0) return Status::Timeout("connect timed out");
    pollfd p{fd, POLLOUT, 0};
    const int rc = poll(&p, 1, ms);
    if (rc > 0) break;
    if (rc < 0 && errno != EINTR) return ErrnoStatus("poll", errno);
  }
  int err = 0;
  socklen_t len = sizeof(err);
  getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
  if (err != 0) return Status::RemoteDisconnect(std::string("connect: ") + std::strerror(err));
  return Status::Ok();
}

Status SetBlocking(int fd, bool blocking) {
  int flags = fcntl(fd, F_GETFL, 0);
  if (flags < 0) return ErrnoStatus("fcntl", errno);
  flags = blocking ? flags & ~O_NONBLOCK : flags | O_NONBLOCK;
  if (fcntl(fd, F_SETFL, flags) < 0) return ErrnoStatus("fcntl", errno);
  return Status::Ok();
}

sockaddr_un UnixAddr(const std::string& name, socklen_t* len) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  size_t n = std::min(name.size(), sizeof(a.sun_path) - 2);
  std::memcpy(a.sun_path + 1, name.data(), n);  // leading NUL: abstract namespace
  *len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
  return a;
}

// One connect to `a` on a fresh socket, made blocking once connected. An
// empty Fd when the listener's accept queue is full (EAGAIN): that socket is
// NOT connected, although poll calls it writable and SO_ERROR holds 0.
Result<Fd> TryConnectUnix(const sockaddr_un& a, socklen_t len, Deadline by) {
  Fd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid()) return ErrnoStatus("socket(AF_UNIX)", errno);
  if (connect(fd.get(), reinterpret_cast<const sockaddr*>(&a), len) != 0) {
    if (errno == EAGAIN || errno == EINTR) return Fd();
    if (errno != EINPROGRESS)
      return Status::RemoteDisconnect(std::string("connect(unix): ") + std::strerror(errno));
    KVLANE_RETURN_IF_ERROR(WaitConnected(fd.get(), by));
  }
  KVLANE_RETURN_IF_ERROR(SetBlocking(fd.get(), true));
  return fd;
}

constexpr char kPeerClosedMessage[] = "peer closed the connection";

// SO_PASSRIGHTS (Linux 6.16); older C library headers lack it. 83 is its
// number where the architecture takes asm-generic/socket.h; elsewhere (-1)
// the option is not set without the header's.
#ifdef SO_PASSRIGHTS
constexpr int kSoPassRights = SO_PASSRIGHTS;
#elif defined(__x86_64__) || defined(__i386__) || defined(__aarch64__) || defined(__arm__) || \
    defined(__riscv)
constexpr int kSoPassRights = 83;
#else
constexpr int kSoPassRights = -1;
#endif
constexpr int kOff = 0;

}  // namespace

Status PeerClosed() { return Status::RemoteDisconnect(kPeerClosedMessage); }

bool IsPeerClosed(const Status& s) {
  return s.code() == Code::kRemoteDisconnect && s.message() == kPeerClosedMessage;
}

Status IoError(const char* what, int err) {
  if (err == ECONNRESET)
    return Status::RemoteDisconnect(std::string(what) + ": connection reset by peer");
  if (err == EPIPE || err == ENOTCONN || err == ESHUTDOWN)
    return Status::RemoteDisconnect(std::string(what) + ": peer closed the connection");
  // tcp: keepalive got no answer, or data stayed unacknowledged (TCP_USER_TIMEOUT),
  // or the network reports the peer unreachable: its host is gone.
  if (err == ETIMEDOUT || err == EHOSTUNREACH || err == ENETUNREACH || err == EHOSTDOWN)
    return Status::RemoteDisconnect(std::string(what) + ": peer unreachable (" +
                                    std::strerror(err) + ")");
  if (err == EAGAIN || err == EWOULDBLOCK)  // the socket's timeout (SetIoTimeout)
    return Status::Timeout(std::string(what) + ": no byte moved within the I/O timeout");
  return ErrnoStatus(what, err);
}

void Fd::Reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Status SendIov(int fd, struct iovec* iov, int n, Deadline by) {
  int first = 0;
  while (first < n) {
    KVLANE_RETURN_IF_ERROR(CheckDeadline(by));
    msghdr msg{};
    msg.msg_iov = iov + first;
    msg.msg_iovlen = std::min(n - first, 1024);
    // EINTR: round the loop, so that no call starts after `by`.
    const ssize_t rc = sendmsg(fd, &msg, MSG_NOSIGNAL);
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0) return IoError("sendmsg", errno);
    Advance(iov, n, &first, static_cast<size_t>(rc));
  }
  return Status::Ok();
}

Result<bool> SendIovIfRoom(int fd, struct iovec* iov, int n, Deadline by) {
  int first = 0;
  bool started = false;
  while (first < n) {
    msghdr msg{};
    msg.msg_iov = iov + first;
    msg.msg_iovlen = std::min(n - first, 1024);
    ssize_t rc;
    KVLANE_SYSCALL_RETRY(rc, sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT));
    if (rc < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!started) return false;
      KVLANE_RETURN_IF_ERROR(AwaitRoomBy(fd, by));
      continue;
    }
    if (rc < 0) return IoError("sendmsg", errno);
    started = true;
    Advance(iov, n, &first, static_cast<size_t>(rc));
  }
  return true;
}

Status SendAll(int fd, const void* buf, size_t len, Deadline by) {
  iovec v{const_cast<void*>(buf), len};
  return SendIov(fd, &v, 1, by);
}

Status RecvIov(int fd, struct iovec* iov, int n, Deadline by) {
  int first = 0;
  while (first < n && iov[first].iov_len == 0) ++first;
  while (first < n) {
    KVLANE_RETURN_IF_ERROR(CheckDeadline(by));
    msghdr msg{};
    msg.msg_iov = iov + first;
    msg.msg_iovlen = std::min(n - first, 1024);
    const ssize_t rc = recvmsg(fd, &msg, MSG_WAITALL);
    if (rc < 0 && errno == EINTR) continue;  // as in SendIov
    if (rc < 0) return IoError("recvmsg", errno);
    if (rc == 0) return PeerClosed();
    Advance(iov, n, &first, static_cast<size_t>(rc));
  }
  return Status::Ok();
}

Status RecvAll(int fd, void* buf, size_t len, Deadline by) {
  iovec v{buf, len};
  return RecvIov(fd, &v, 1, by);
}

Status Discard(int fd, uint64_t len, Deadline by) {
  char sink[16384];
  while (len > 0) {
    size_t n = std::min<uint64_t>(len, sizeof(sink));
    KVLANE_RETURN_IF_ERROR(RecvAll(fd, sink, n, by));
    len -= n;
  }
  return Status::Ok();
}

Status SetIoTimeout(int fd, std::chrono::milliseconds timeout) {
  KVLANE_RETURN_IF_ERROR(SetRecvTimeout(fd, timeout));
  const timeval tv = ToTimeval(timeout);
  KVLANE_POSIX(setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)));
  return Status::Ok();
}

Status SetRecvTimeout(int fd, std::chrono::milliseconds timeout) {
  const timeval tv = ToTimeval(timeout);
  KVLANE_POSIX(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)));
  return Status::Ok();
}

int PollFor(pollfd* fds, int n, std::chrono::milliseconds timeout) {
  using Clock = std::chrono::steady_clock;
  const auto until = Clock::now() + timeout;
  for (;;) {
    int ms = -1;
    if (timeout.count() >= 0) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(until - Clock::now());
      ms = static_cast<int>(std::clamp<int64_t>(left.count(), 0, INT_MAX));
    }
    const int rc = poll(fds, static_cast<nfds_t>(n), ms);
    if (rc >= 0 || errno != EINTR) return rc;
  }
}

Status WaitReadable(int fd, std::chrono::milliseconds timeout) {
  pollfd p{fd, POLLIN, 0};
  const int rc = PollFor(&p, 1, timeout);
  if (rc < 0) return ErrnoStatus("poll", errno);
  if (rc == 0) return Status::Timeout("no data from peer within the I/O timeout");
  return Status::Ok();
}

Status SplitHostPort(const std::string& hp, std::string* host, uint16_t* port) {
  size_t colon = hp.rfind(':');
  if (colon == std::string::npos || colon + 1 >= hp.size())
    return Status::InvalidArgument("expected HOST:PORT, got '" + hp + "'");
  std::string h = hp.substr(0, colon);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  char* end = nullptr;
  unsigned long p = std::strtoul(hp.c_str() + colon + 1, &end, 10);
  if (*end != '\0' || p > 65535) return Status::InvalidArgument("bad port in '" + hp + "'");
  if (h.empty())
    return Status::InvalidArgument("no host in '" + hp +
                                   "' (to listen on every interface, say 0.0.0.0:PORT)");
  *host = h;
  *port = static_cast<uint16_t>(p);
  return Status::Ok();
}

Result<Fd> ListenTcp(const std::string& host, uint16_t port, uint16_t* bound_port) {
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  std::string ps = std::to_string(port);
  int rc = getaddrinfo(host.c_str(), ps.c_str(), &hints, &res);
  if (rc != 0)
    return Status::InvalidArgument("cannot resolve listen host '" + host +
                                   "': " + gai_strerror(rc));
  Fd fd(socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  int err = errno;  // socket()'s, before setsockopt below could overwrite it
  bool bad = !fd.valid();
  if (!bad) {
    int one = 1;
    setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    bad = bind(fd.get(), res->ai_addr, res->ai_addrlen) != 0 || listen(fd.get(), 128) != 0;
    err = errno;
  }
  freeaddrinfo(res);
  if (bad) return ErrnoStatus(("listen on " + host + ":" + ps).c_str(), err);
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  getsockname(fd.get(), reinterpret_cast<sockaddr*>(&ss), &len);
  *bound_port = ntohs(ss.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port
                                               : reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  return fd;
}

Result<Fd> ConnectTcp(const std::string& host, uint16_t port, std::chrono::milliseconds timeout) {
  return ConnectTcp(host, port, DeadlineIn(timeout));
}

Result<Fd> ConnectTcp(const std::string& host, uint16_t port, Deadline by) {
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  std::string ps = std::to_string(port);
  int rc = getaddrinfo(host.c_str(), ps.c_str(), &hints, &res);
  if (rc != 0)
    return Status::RemoteDisconnect("cannot resolve '" + host + "': " + gai_strerror(rc));
  Fd fd(socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  Status s = fd.valid() ? Status::Ok() : ErrnoStatus("socket", errno);
  if (s.ok() && connect(fd.get(), res->ai_addr, res->ai_addrlen) != 0) {
    s = errno == EINPROGRESS
            ? WaitConnected(fd.get(), by)
            : Status::RemoteDisconnect(std::string("connect: ") + std::strerror(errno));
  }
  freeaddrinfo(res);
  if (!s.ok()) return Status(s.code(), s.message() + " (" + host + ":" + ps + ")");
  KVLANE_RETURN_IF_ERROR(SetBlocking(fd.get(), true));
  SetNoDelay(fd.get());
  return fd;
}

Result<Fd> ListenUnix(const std::string& name) {
  socklen_t len;
  sockaddr_un a = UnixAddr(name, &len);
  Fd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return ErrnoStatus("socket(AF_UNIX)", errno);
  // Accepted connections take no descriptors from their peers (Linux 6.16+;
  // older kernels: ENOPROTOOPT, and closing an unwanted one is made safe where
  // it can be, fd_passing.cc). A descriptor queued on a connection is closed
  // with it, by the thread that closes it: a socket the sender made to
  // linger, or a file whose flush never ends, would hold that thread.
  if (kSoPassRights >= 0 &&
      setsockopt(fd.get(), SOL_SOCKET, kSoPassRights, &kOff, sizeof(kOff)) != 0 &&
      errno != ENOPROTOOPT && errno != EINVAL)
    return ErrnoStatus("setsockopt(SO_PASSRIGHTS)", errno);
  if (bind(fd.get(), reinterpret_cast<sockaddr*>(&a), len) != 0)
    return ErrnoStatus("bind(unix)", errno);
  if (listen(fd.get(), 128) != 0) return ErrnoStatus("listen(unix)", errno);
  return fd;
}

ucred PeerCred(int fd) {
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0)
    return ucred{0, static_cast<uid_t>(-1), 0};
  return cred;
}

Result<Fd> ConnectUnix(const std::string& name, std::chrono::milliseconds timeout) {
  return ConnectUnix(name, DeadlineIn(timeout));
}

Result<Fd> ConnectUnix(const std::string& name, Deadline by) {
  socklen_t len;
  const sockaddr_un a = UnixAddr(name, &len);
  for (Backoff backoff;; backoff.Nap()) {
    KVLANE_ASSIGN_OR_RETURN(Fd fd, TryConnectUnix(a, len, by));
    if (fd.valid()) return fd;
    if (std::chrono::steady_clock::now() >= by)
      return Status::Timeout("connect(unix) timed out: the listener's accept queue stayed full");
  }
}

Result<Fd> Accept(int listen_fd) {
  int fd;
  KVLANE_SYSCALL_RETRY(fd, accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC));
  if (fd < 0) {
    if (errno == EINVAL || errno == EBADF) return Status::Canceled("listener closed");
    return ErrnoStatus("accept", errno);
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));  // harmless on unix sockets
  return Fd(fd);
}

}  // namespace kvlane::core
