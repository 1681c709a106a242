#include "transport/stream/keepalive.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <limits>

#include "core/sys.h"

namespace kvlane::core {

Keepalive KeepaliveFor(const AgentOptions& o) {
  using std::chrono::milliseconds;
  using std::chrono::seconds;
  const seconds idle = o.tcp_keepalive;
  if (idle.count() <= 0) return Keepalive{};
  Keepalive k{idle, std::max(seconds(1), idle / kKeepaliveProbes), kKeepaliveProbes};
  k.user_timeout =
      std::max<milliseconds>(k.idle + k.interval * k.probes, 2 * o.io_timeout + seconds(1));
  return k;
}

namespace {

// Whether a failed setsockopt says the socket or kernel lacks the option:
// ENOPROTOOPT (a kernel without it), EOPNOTSUPP (a socket without that level),
// or EINVAL, which a kernel (or an emulation of one) that does not take the
// option may answer too: our values are within Linux's ranges
// (AgentOptions::Validate), so it says nothing about them.
bool OptionUnsupported(int err) { return err == ENOPROTOOPT || err == EOPNOTSUPP || err == EINVAL; }

// Sets one int option; an unsupported one is skipped (keepalive is a best
// effort there), any other error fails.
Status SetIfSupported(int fd, int level, int name, int value, const char* what) {
  int rc;
  KVLANE_SYSCALL_RETRY(rc, setsockopt(fd, level, name, &value, sizeof(value)));
  if (rc == 0 || OptionUnsupported(errno)) return Status::Ok();
  return ErrnoStatus(what, errno);
}

}  // namespace

Status SetKeepalive(int fd, const Keepalive& k) {
  if (!k.on()) return Status::Ok();
  const int on = 1;
  const int idle = static_cast<int>(k.idle.count());
  const int interval = static_cast<int>(k.interval.count());
  // Without it, unacknowledged data would be retransmitted for ~15 minutes, and
  // the kernel sends no probe while data is unacknowledged.
  const int user_timeout =
      static_cast<int>(std::min<int64_t>(k.user_timeout.count(), std::numeric_limits<int>::max()));
  KVLANE_RETURN_IF_ERROR(
      SetIfSupported(fd, SOL_SOCKET, SO_KEEPALIVE, on, "setsockopt(SO_KEEPALIVE)"));
  KVLANE_RETURN_IF_ERROR(
      SetIfSupported(fd, IPPROTO_TCP, TCP_KEEPIDLE, idle, "setsockopt(TCP_KEEPIDLE)"));
  KVLANE_RETURN_IF_ERROR(
      SetIfSupported(fd, IPPROTO_TCP, TCP_KEEPINTVL, interval, "setsockopt(TCP_KEEPINTVL)"));
  KVLANE_RETURN_IF_ERROR(
      SetIfSupported(fd, IPPROTO_TCP, TCP_KEEPCNT, k.probes, "setsockopt(TCP_KEEPCNT)"));
  return SetIfSupported(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, user_timeout,
                        "setsockopt(TCP_USER_TIMEOUT)");
}

}  // namespace kvlane::core
