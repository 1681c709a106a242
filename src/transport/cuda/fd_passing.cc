#include "transport/cuda/fd_passing.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "core/sys.h"

namespace kvlane::core {
namespace {

constexpr int kMaxFds = 4;  // room for a few, so that extras are seen (and closed), not truncated

// Takes every descriptor of `msg`'s SCM_RIGHTS data: the first into `*fd` if it
// is still empty, the others closed.
void TakeFds(msghdr* msg, Fd* fd) {
  for (cmsghdr* c = CMSG_FIRSTHDR(msg); c != nullptr; c = CMSG_NXTHDR(msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < n; ++i) {
      int got;
      std::memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      if (!fd->valid())
        *fd = Fd(got);
      else
        ::close(got);
    }
  }
}

}  // namespace

Status SendWithFd(int sock, const void* buf, size_t len, int fd) {
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  const char* p = static_cast<const char*>(buf);
  bool attach = fd >= 0;
  while (len > 0) {
    iovec v{const_cast<char*>(p), len};
    msghdr msg{};
    msg.msg_iov = &v;
    msg.msg_iovlen = 1;
    if (attach) {
      msg.msg_control = control;
      msg.msg_controllen = sizeof(control);
      cmsghdr* c = CMSG_FIRSTHDR(&msg);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int));
      std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
    }
    ssize_t rc;
    KVLANE_SYSCALL_RETRY(rc, sendmsg(sock, &msg, MSG_NOSIGNAL));
    if (rc < 0) return ErrnoStatus("sendmsg(SCM_RIGHTS)", errno);
    attach = false;  // sent with the first bytes that went out
    p += rc;
    len -= static_cast<size_t>(rc);
  }
  return Status::Ok();
}

Status RecvWithFd(int sock, void* buf, size_t len, Fd* fd) {
  char* p = static_cast<char*>(buf);
  while (len > 0) {
    alignas(cmsghdr) char control[CMSG_SPACE(kMaxFds * sizeof(int))];
    iovec v{p, len};
    msghdr msg{};
    msg.msg_iov = &v;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    ssize_t rc;
    KVLANE_SYSCALL_RETRY(rc, recvmsg(sock, &msg, MSG_CMSG_CLOEXEC));
    if (rc < 0) return ErrnoStatus("recvmsg(SCM_RIGHTS)", errno);
    if (rc == 0) return Status::RemoteDisconnect("peer closed the connection");
    TakeFds(&msg, fd);
    if (msg.msg_flags & MSG_CTRUNC) return Status::Backend("recvmsg: control data truncated");
    p += rc;
    len -= static_cast<size_t>(rc);
  }
  return Status::Ok();
}

}  // namespace kvlane::core
