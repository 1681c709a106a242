#include "transport/stream/keepalive.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
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

Status SetKeepalive(int fd, const Keepalive& k) {
  if (!k.on()) return Status::Ok();
  const int on = 1;
  const int idle = static_cast<int>(k.idle.count());
  const int interval = static_cast<int>(k.interval.count());
  // Without it, unacknowledged data would be retransmitted for ~15 minutes, and
  // the kernel sends no probe while data is unacknowledged.
  const int user_timeout =
      static_cast<int>(std::min<int64_t>(k.user_timeout.count(), std::numeric_limits<int>::max()));
  KVLANE_POSIX(setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on)));
  KVLANE_POSIX(setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle)));
  KVLANE_POSIX(setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof(interval)));
  KVLANE_POSIX(setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &k.probes, sizeof(k.probes)));
  KVLANE_POSIX(setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout, sizeof(user_timeout)));
  return Status::Ok();
}

}  // namespace kvlane::core
