#include "transport/stream/fd_passing.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <string>

#include "core/sys.h"

namespace kvlane::core {
namespace {

// Room for as many as one message can carry (SCM_MAX_FD): descriptors that
// do not fit are dropped by the kernel, closed on this thread as it returns,
// beyond CloseUnwanted's reach (a lingering socket would hold it).
constexpr int kMaxFds = 253;

// Closes a descriptor a peer sent that nobody asked for. A socket closes
// abortively: with SO_LINGER set and unsent data queued, its close would
// block this thread for as long as the sender chose.
void CloseUnwanted(int fd) {
  const linger abort_now{1, 0};
  (void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &abort_now, sizeof(abort_now));  // ENOTSOCK: not one
  ::close(fd);
}

// Takes every descriptor of `msg`'s SCM_RIGHTS data: the first into `*fd` if it
// is still empty (and `fd` not null), the others closed.
void TakeFds(msghdr* msg, Fd* fd) {
  for (cmsghdr* c = CMSG_FIRSTHDR(msg); c != nullptr; c = CMSG_NXTHDR(msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS || c->cmsg_len < CMSG_LEN(0))
      continue;
    size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < n; ++i) {
      int got;
      std::memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      if (fd != nullptr && !fd->valid())
        *fd = Fd(got);
      else
        CloseUnwanted(got);
    }
  }
}

// Points `msg` at `control`, filled with one SCM_RIGHTS descriptor `fd`.
void Attach(msghdr* msg, char* control, size_t size, int fd) {
  msg->msg_control = control;
  msg->msg_controllen = size;
  cmsghdr* c = CMSG_FIRSTHDR(msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
}

// Drops `done` bytes from the front of iov[*first..n), and the empty entries after them.
void Advance(iovec* iov, int n, int* first, size_t done) {
  while (*first < n && done >= iov[*first].iov_len) done -= iov[(*first)++].iov_len;
  if (*first < n) {
    iov[*first].iov_base = static_cast<char*>(iov[*first].iov_base) + done;
    iov[*first].iov_len -= done;
  }
}

bool WouldBlock(int err) { return err == EAGAIN || err == EWOULDBLOCK; }

// One recvmsg of at most `len` bytes, without waiting; the descriptors that
// came with them as TakeFds says. Its result (errno set when < 0).
ssize_t RecvOnce(int sock, void* buf, size_t len, Fd* fd, bool* truncated) {
  alignas(cmsghdr) char control[CMSG_SPACE(kMaxFds * sizeof(int))];
  iovec v{buf, len};
  msghdr msg{};
  msg.msg_iov = &v;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t rc;
  KVLANE_SYSCALL_RETRY(rc, recvmsg(sock, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT));
  if (rc <= 0) return rc;
  TakeFds(&msg, fd);
  *truncated = (msg.msg_flags & MSG_CTRUNC) != 0;
  return rc;
}

}  // namespace

Status WaitFor(int sock, short events, Deadline deadline) {
  for (;;) {
    int ms = -1;
    if (deadline != kNoDeadline) {
      auto left =
          std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0)
        return Status::Timeout("no progress with the peer within the I/O timeout");
      ms = static_cast<int>(std::min<int64_t>(left.count(), INT_MAX));
    }
    pollfd p{sock, events, 0};
    int rc = poll(&p, 1, ms);
    if (rc < 0 && errno != EINTR) return ErrnoStatus("poll", errno);
    if (rc > 0) return Status::Ok();  // ready, or hung up / failed: the next call says which
  }
}

Status SendIovBy(int sock, iovec* iov, int n, int fd, Deadline deadline) {
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  bool attach = fd >= 0;
  int first = 0;
  Advance(iov, n, &first, 0);
  while (first < n) {
    KVLANE_RETURN_IF_ERROR(WaitFor(sock, POLLOUT, deadline));
    msghdr msg{};
    msg.msg_iov = iov + first;
    msg.msg_iovlen = static_cast<size_t>(std::min(n - first, 1024));
    if (attach) Attach(&msg, control, sizeof(control), fd);
    ssize_t rc;
    KVLANE_SYSCALL_RETRY(rc, sendmsg(sock, &msg, MSG_NOSIGNAL | MSG_DONTWAIT));
    if (rc < 0 && WouldBlock(errno)) continue;
    if (rc < 0) return IoError("sendmsg", errno);
    attach = false;  // sent with the first bytes that went out
    Advance(iov, n, &first, static_cast<size_t>(rc));
  }
  return Status::Ok();
}

Status SendWithFd(int sock, const void* buf, size_t len, int fd, Deadline deadline) {
  iovec v{const_cast<void*>(buf), len};
  return SendIovBy(sock, &v, 1, fd, deadline);
}

Status RecvWithFd(int sock, void* buf, size_t len, Fd* fd, Deadline deadline) {
  char* p = static_cast<char*>(buf);
  while (len > 0) {
    KVLANE_RETURN_IF_ERROR(WaitFor(sock, POLLIN, deadline));
    bool truncated = false;
    const ssize_t rc = RecvOnce(sock, p, len, fd, &truncated);
    if (rc < 0 && WouldBlock(errno)) continue;
    if (rc < 0) return IoError("recvmsg", errno);
    if (rc == 0) return PeerClosed();
    if (truncated) return Status::Backend("recvmsg: control data truncated");
    p += rc;
    len -= static_cast<size_t>(rc);
  }
  return Status::Ok();
}

void DrainQueued(int sock) {
  char sink[4096];
  bool truncated = false;
  for (int i = 0; i < kDrainMessages; ++i) {
    if (RecvOnce(sock, sink, sizeof(sink), nullptr, &truncated) <= 0)
      return;  // empty, ended, failed
  }
}

}  // namespace kvlane::core
