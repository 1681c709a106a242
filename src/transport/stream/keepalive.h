// TCP keepalive of an agent's tcp connections (AgentOptions::tcp_keepalive): how
// the one option becomes the kernel's settings, and setting them on a socket.
// A peer whose host vanished (no FIN or RST) then ends its connections after
// `Keepalive::user_timeout`, idle or not: the socket fails with ETIMEDOUT.
#pragma once

#include <chrono>

#include "kvlane/options.h"
#include "kvlane/status.h"

namespace kvlane::core {

// Probes in a round before the peer counts as gone.
inline constexpr int kKeepaliveProbes = 3;

struct Keepalive {
  std::chrono::seconds idle{0};      // TCP_KEEPIDLE; 0: keepalive off
  std::chrono::seconds interval{0};  // TCP_KEEPINTVL
  int probes = 0;                    // TCP_KEEPCNT
  // TCP_USER_TIMEOUT: the peer's silence after which the kernel drops the
  // connection. Once set, it also decides when keepalive gives up (the kernel
  // then ignores TCP_KEEPCNT), and it ends data left unacknowledged that long,
  // and (Linux 5.11 on) a receive window kept shut that long by a live peer.
  std::chrono::milliseconds user_timeout{0};

  bool on() const { return idle.count() > 0; }
};

// From AgentOptions: tcp_keepalive idle, then kKeepaliveProbes probes
// max(1 s, idle / 3) apart, and a user timeout of the last probe's deadline but
// at least 2 x io_timeout + 1 s: a live peer that stops reading fails by
// io_timeout (kTimeout; a target's frame by 2 x io_timeout) before the kernel
// gives up on it. A silent peer is dropped after that user timeout:
// max(idle + kKeepaliveProbes x interval, 2 x io_timeout + 1 s).
// REQUIRES: `o` valid (AgentOptions::Validate: tcp_keepalive 0..32767 s).
Keepalive KeepaliveFor(const AgentOptions& o);

// Sets SO_KEEPALIVE, TCP_KEEPIDLE, TCP_KEEPINTVL, TCP_KEEPCNT and TCP_USER_TIMEOUT
// on `fd`; with keepalive off, nothing (a new socket has neither). Best effort
// per option: one the kernel or socket does not support (ENOPROTOOPT,
// EOPNOTSUPP, EINVAL) is skipped and the others still set, so the connection
// goes on without it; any other error (EBADF, ...) fails with kBackend.
// Meant for TCP sockets (unix sockets need no keepalive: their peer is on this
// host, and its death closes them; on one, the TCP options are skipped).
Status SetKeepalive(int fd, const Keepalive& k);

}  // namespace kvlane::core
