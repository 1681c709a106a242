// The probes' two buffers: 1 MiB on GPU 0 (every byte 7) and 1 MiB on GPU 1
// (GPU 0 again on a one-GPU machine), with GPU 0's peer access to GPU 1
// enabled and GPU 0 current. Freed at exit (probes run once).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace kvlane::test {

struct TwoGpuBuffers {
  int peer = 0;         // the second buffer's GPU
  uint64_t local = 0;   // GPU 0
  uint64_t remote = 0;  // GPU `peer`
};

inline TwoGpuBuffers AllocTwoGpuBuffers() {
  constexpr size_t kBytes = 1 << 20;
  TwoGpuBuffers b;
  int ndev = 0;
  cudaGetDeviceCount(&ndev);
  b.peer = ndev > 1 ? 1 : 0;
  void *p0 = nullptr, *p1 = nullptr;
  cudaSetDevice(b.peer);
  cudaMalloc(&p1, kBytes);
  cudaSetDevice(0);
  if (b.peer != 0) cudaDeviceEnablePeerAccess(b.peer, 0);
  cudaMalloc(&p0, kBytes);
  cudaMemset(p0, 7, kBytes);
  b.local = reinterpret_cast<uint64_t>(p0);
  b.remote = reinterpret_cast<uint64_t>(p1);
  return b;
}

}  // namespace kvlane::test
