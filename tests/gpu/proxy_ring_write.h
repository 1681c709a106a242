// The probes' stand-in for CudaProxy::Write: entry n of a proxy ring, one
// segment src -> dst of `len` bytes, the record of slot 0 with generation
// `gen`; fields first, `ready` (n + 1) last with release, as the engine does.
// Plain C++ (no CUDA): proxy_types_test builds its entries with it too.
#pragma once

#include <cstdint>
#include <cstring>

#include "gpu/copy_types.h"

namespace kvlane::test {

// Entry n as described above, `ready` and `check` filled in.
inline gpu::ProxyEntry ProxyEntryFor(uint64_t n, uint16_t op, uint32_t gen, uint64_t src,
                                     uint64_t dst, uint64_t len) {
  gpu::ProxyEntry full{};
  full.op = op;
  full.nsegs = 1;
  full.seg = {src, dst, len};
  full.value = n + 1;
  full.record = 1;
  full.gen = gen;
  full.ready = n + 1;
  full.check = gpu::ProxyCheck(full);
  return full;
}

inline void WriteProxyEntry(gpu::ProxyEntry* ring, uint64_t n, uint16_t op, uint32_t gen,
                            uint64_t src, uint64_t dst, uint64_t len) {
  gpu::ProxyEntry& slot = ring[n % gpu::kProxyRing];
  const gpu::ProxyEntry full = ProxyEntryFor(n, op, gen, src, dst, len);
  std::memcpy(reinterpret_cast<char*>(&slot) + 8, reinterpret_cast<const char*>(&full) + 8,
              sizeof(full) - 8);
  __atomic_store_n(&slot.ready, full.ready, __ATOMIC_RELEASE);
}

}  // namespace kvlane::test
