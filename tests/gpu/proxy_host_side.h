// The probes' stand-in for CudaProxy's pinned host memory: a proxy ring, its
// flags, its completion words and `slots` request records, all mapped and
// zeroed; freed when it goes (probes run on a GPU machine, errors unchecked as
// in the rest of the probes: a failed allocation shows as a crash or a STUCK run).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

#include "gpu/copy_types.h"

namespace kvlane::test {

struct ProxyHostSide {
  gpu::ProxyEntry* ring = nullptr;
  gpu::ProxyCtl* ctl = nullptr;
  uint64_t* done = nullptr;
  uint8_t* records = nullptr;

  explicit ProxyHostSide(uint32_t slots) {
    constexpr unsigned kFlags = cudaHostAllocMapped | cudaHostAllocPortable;
    cudaHostAlloc(&ring, gpu::kProxyRing * sizeof(gpu::ProxyEntry), kFlags);
    cudaHostAlloc(&ctl, sizeof(gpu::ProxyCtl), kFlags);
    cudaHostAlloc(&done, gpu::kProxyRing * sizeof(uint64_t), kFlags);
    cudaHostAlloc(&records, slots * gpu::kRecordStride, kFlags);
    std::memset(ring, 0, gpu::kProxyRing * sizeof(gpu::ProxyEntry));
    std::memset(ctl, 0, sizeof(gpu::ProxyCtl));
    std::memset(done, 0, gpu::kProxyRing * sizeof(uint64_t));
    std::memset(records, 0, slots * gpu::kRecordStride);
  }
  ~ProxyHostSide() {
    cudaFreeHost(ring);
    cudaFreeHost(ctl);
    cudaFreeHost(done);
    cudaFreeHost(records);
  }
  ProxyHostSide(const ProxyHostSide&) = delete;
  ProxyHostSide& operator=(const ProxyHostSide&) = delete;
};

}  // namespace kvlane::test
