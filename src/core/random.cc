#include "core/random.h"

#include <pthread.h>
#include <sys/random.h>

#include <atomic>
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

namespace {

std::atomic<uint64_t> g_token{0};

// A forked child is another process: it must not take its parent's agents
// (copies in its own memory, their threads gone) for agents of its own.
void RenewTokenInChild() { g_token.store(RandomU64(), std::memory_order_relaxed); }

// At load, not at first use: a fork while another thread ran a first use's
// initialization would leave the child waiting on it for good.
const bool kRenewedAtFork = pthread_atfork(nullptr, nullptr, &RenewTokenInChild) == 0;

}  // namespace

uint64_t ProcessToken() {
  (void)kRenewedAtFork;
  uint64_t t = g_token.load(std::memory_order_relaxed);
  if (t != 0) return t;
  uint64_t fresh = RandomU64();
  return g_token.compare_exchange_strong(t, fresh, std::memory_order_relaxed) ? fresh : t;
}

}  // namespace kvlane::core
