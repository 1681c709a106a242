// Loopback socket addresses for the kvbench tests: 127.0.0.1 or any other
// address of 127/8 (Linux routes all of it to the loopback device), and a bind to
// a port the kernel picks there. Header-only, no kvbench code.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>

namespace kvbench::testing {

// `host` (host byte order, 127.0.0.1 unless given):`port` as a socket address.
inline sockaddr_in LoopbackAddress(uint16_t port, uint32_t host = INADDR_LOOPBACK) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(host);
  a.sin_port = htons(port);
  return a;
}

// Binds the IPv4 socket `fd` to a port the kernel picks on `host` and returns
// that port; 0 when bind or getsockname failed (errno says why).
inline uint16_t BindLoopback(int fd, uint32_t host = INADDR_LOOPBACK) {
  sockaddr_in a = LoopbackAddress(0, host);
  socklen_t len = sizeof(a);
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
    return 0;
  return ntohs(a.sin_port);
}

}  // namespace kvbench::testing
