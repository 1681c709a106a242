#include "core/random.h"

#include <sys/random.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>

namespace kvlane::core {

void RandomBytes(void* out, uint64_t n) {
  auto* p = static_cast<unsigned char*>(out);
  while (n > 0) {
    ssize_t got = getrandom(p, n, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      std::perror("kvlane: getrandom");
      std::abort();
    }
    p += got;
    n -= static_cast<uint64_t>(got);
  }
}

uint64_t RandomU64() {
  uint64_t v = 0;
  while (v == 0) RandomBytes(&v, sizeof(v));
  return v;
}

uint64_t ProcessToken() {
  static const uint64_t token = RandomU64();
  return token;
}

}  // namespace kvlane::core
