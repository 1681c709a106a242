// kvbench's pattern kernels: fill, wipe and verify a descriptor list in one
// launch each. Block b takes table entries b, b + gridDim.x, ...; its threads
// stride over the entry's 8-byte words (pattern_types.h holds the per-thread
// work, shared with the host tests).
#include <cuda_runtime.h>

#include "gpu/pattern_launch.h"

namespace kvbench::gpu {
namespace {

constexpr uint64_t kMaxBlocks = 1u << 16;  // more entries: blocks loop over them

__global__ void __launch_bounds__(kPatternThreads)
    FillKernel(const PatternExtent* __restrict__ table, uint64_t n, uint64_t key) {
  for (uint64_t e = blockIdx.x; e < n; e += gridDim.x) {
    FillRange(table[e], key, threadIdx.x, blockDim.x);
  }
}

__global__ void __launch_bounds__(kPatternThreads)
    WipeKernel(const PatternExtent* __restrict__ table, uint64_t n, uint8_t byte) {
  for (uint64_t e = blockIdx.x; e < n; e += gridDim.x) {
    WipeRange(table[e], byte, threadIdx.x, blockDim.x);
  }
}

// Sums counts and takes the minimum of firsts over the block; thread 0 holds both.
__device__ ThreadMismatches BlockReduce(ThreadMismatches m) {
  __shared__ unsigned long long counts[kPatternThreads / 32];
  __shared__ unsigned long long firsts[kPatternThreads / 32];
  for (int d = 16; d > 0; d /= 2) {
    m.count += __shfl_down_sync(0xffffffffu, m.count, d);
    m.first = min(m.first, __shfl_down_sync(0xffffffffu, m.first, d));
  }
  const int warp = threadIdx.x / 32;
  if (threadIdx.x % 32 == 0) counts[warp] = m.count, firsts[warp] = m.first;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < static_cast<int>(blockDim.x / 32); ++w) {
      m.count += counts[w];
      m.first = min(m.first, static_cast<uint64_t>(firsts[w]));
    }
  }
  __syncthreads();  // the shared arrays are reused by the block's next entry
  return m;
}

__global__ void __launch_bounds__(kPatternThreads)
    VerifyKernel(const PatternExtent* __restrict__ table, uint64_t n, uint64_t key,
                 VerifyTotals* totals) {
  for (uint64_t e = blockIdx.x; e < n; e += gridDim.x) {
    const ThreadMismatches m = BlockReduce(VerifyRange(table[e], key, threadIdx.x, blockDim.x));
    if (threadIdx.x != 0 || m.count == 0) continue;
    atomicAdd(&totals->mismatches, static_cast<unsigned long long>(m.count));
    atomicMin(&totals->first, PackFirst(e, m.first));
  }
}

__global__ void ResetKernel(VerifyTotals* totals) { *totals = {0, kNoMismatch}; }

unsigned Blocks(uint64_t n) { return static_cast<unsigned>(n < kMaxBlocks ? n : kMaxBlocks); }

}  // namespace

cudaError_t LaunchFillPattern(const PatternExtent* table, uint64_t n, uint32_t rank, uint64_t epoch,
                              cudaStream_t stream) {
  if (n == 0 || n >= kMaxEntries) return cudaErrorInvalidValue;
  FillKernel<<<Blocks(n), kPatternThreads, 0, stream>>>(table, n, PatternKey(rank, epoch));
  return cudaGetLastError();
}

cudaError_t LaunchWipe(const PatternExtent* table, uint64_t n, uint8_t byte, cudaStream_t stream) {
  if (n == 0 || n >= kMaxEntries) return cudaErrorInvalidValue;
  WipeKernel<<<Blocks(n), kPatternThreads, 0, stream>>>(table, n, byte);
  return cudaGetLastError();
}

cudaError_t LaunchVerifyPattern(const PatternExtent* table, uint64_t n, uint32_t rank,
                                uint64_t epoch, VerifyTotals* totals, cudaStream_t stream) {
  if (n == 0 || n >= kMaxEntries) return cudaErrorInvalidValue;
  ResetKernel<<<1, 1, 0, stream>>>(totals);
  VerifyKernel<<<Blocks(n), kPatternThreads, 0, stream>>>(table, n, PatternKey(rank, epoch),
                                                          totals);
  return cudaGetLastError();
}

}  // namespace kvbench::gpu
