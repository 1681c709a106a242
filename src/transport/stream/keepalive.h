// TCP keepalive of an agent's tcp connections (AgentOptions::tcp_keepalive): how
// the one option becomes the kernel's settings, and setting them on a socket.
// A peer whose host vanished (no FIN or RST) then ends its connections after
// `Keepalive::dead_after()`, idle or not: the socket fails with ETIMEDOUT.
#pragma once

#include <chrono>

#include "kvlane/status.h"

namespace kvlane::core {

// Probes in a round before the peer counts as gone.
inline constexpr int kKeepaliveProbes = 3;

struct Keepalive {
  std::chrono::seconds idle{0};      // TCP_KEEPIDLE; 0: keepalive off
  std::chrono::seconds interval{0};  // TCP_KEEPINTVL
  int probes = 0;                    // TCP_KEEPCNT

  bool on() const { return idle.count() > 0; }
  // The peer's silence after which the kernel drops the connection: the last
  // probe's deadline, also the bound on unacknowledged data (TCP_USER_TIMEOUT).
  std::chrono::seconds dead_after() const { return idle + interval * probes; }
};

// `idle` (AgentOptions::tcp_keepalive), then kKeepaliveProbes probes
// max(1 s, idle / 3) apart: a silent peer is dropped after about 2 x idle.
// REQUIRES: idle in 0..32767 s (AgentOptions::Validate).
Keepalive KeepaliveAfter(std::chrono::seconds idle);

// Sets SO_KEEPALIVE, TCP_KEEPIDLE, TCP_KEEPINTVL, TCP_KEEPCNT and TCP_USER_TIMEOUT
// (dead_after) on `fd`; with keepalive off, nothing (a new socket has neither).
// REQUIRES: fd is a TCP socket (unix sockets have no keepalive:
// their peer is on this host, and its death closes them).
Status SetKeepalive(int fd, const Keepalive& k);

}  // namespace kvlane::core
