// The copy kernel of the cuda transport: one launch moves every segment of a
// batch (grid-stride over segments, blocks split large segments), then the last
// block to finish writes the completion word into pinned host memory.
#include <cuda_runtime.h>

#include "gpu/copy_launch.h"

namespace kvlane::gpu {
namespace {

constexpr int kUnroll = 4;
constexpr uint64_t kPartAlign = 4096;  // parts of a split segment start on this

// 16-byte body with byte head and tail. REQUIRES: dst and src congruent mod 16.
__device__ void CopyAligned(uint8_t* dst, const uint8_t* src, uint64_t len) {
  const uint64_t tid = threadIdx.x, n = blockDim.x;
  uint64_t head = min(len, (16 - (reinterpret_cast<uintptr_t>(dst) & 15)) & 15);
  for (uint64_t i = tid; i < head; i += n) dst[i] = src[i];
  const uint64_t nv = (len - head) / 16;
  uint4* d = reinterpret_cast<uint4*>(dst + head);
  const uint4* s = reinterpret_cast<const uint4*>(src + head);
  for (uint64_t base = tid; base < nv; base += n * kUnroll) {
    uint4 v[kUnroll];
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
      uint64_t i = base + k * n;
      if (i < nv) v[k] = s[i];
    }
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
      uint64_t i = base + k * n;
      if (i < nv) d[i] = v[k];
    }
  }
  for (uint64_t i = head + nv * 16 + tid; i < len; i += n) dst[i] = src[i];
}

__device__ void CopyRange(uint64_t dst, uint64_t src, uint64_t len) {
  auto* d = reinterpret_cast<uint8_t*>(dst);
  const auto* s = reinterpret_cast<const uint8_t*>(src);
  if (((dst ^ src) & 15) == 0) {
    CopyAligned(d, s, len);
  } else {
    for (uint64_t i = threadIdx.x; i < len; i += blockDim.x) d[i] = s[i];
  }
}

// The last block (by arrival) publishes completion; every thread fences first
// so that its stores (to a peer GPU or host) are visible system-wide before the
// host can observe `done`.
__device__ void SignalWhenLast(const CopyDone& done) {
  __threadfence_system();
  __syncthreads();
  if (threadIdx.x != 0) return;
  unsigned prev = atomicAdd(done.blocks_finished, 1u);
  if (prev != gridDim.x - 1) return;
  *done.blocks_finished = 0;  // the next launch on this stream starts from zero
  __threadfence_system();
  *reinterpret_cast<volatile uint64_t*>(done.done) = done.value;
}

__global__ void CopySegmentsKernel(const CopySeg* __restrict__ segs, uint32_t begin, uint32_t end,
                                   CopyDone done) {
  const uint32_t nseg = end - begin;
  const uint32_t parts = max(1u, gridDim.x / nseg);
  const uint32_t groups = gridDim.x / parts;
  const uint32_t group = blockIdx.x / parts, part = blockIdx.x % parts;
  if (group < groups) {
    for (uint32_t i = begin + group; i < end; i += groups) {
      const CopySeg sg = segs[i];
      uint64_t piece = (sg.len + parts - 1) / parts;
      piece = (piece + kPartAlign - 1) / kPartAlign * kPartAlign;
      uint64_t off = uint64_t{part} * piece;
      if (off < sg.len) CopyRange(sg.dst + off, sg.src + off, min(piece, sg.len - off));
    }
  }
  SignalWhenLast(done);
}

__global__ void SignalKernel(uint64_t* done, uint64_t value) {
  __threadfence_system();
  *reinterpret_cast<volatile uint64_t*>(done) = value;
}

}  // namespace

cudaError_t LaunchCopySegments(const CopySeg* segs, uint32_t begin, uint32_t end, int blocks,
                               const CopyDone& done, cudaStream_t stream) {
  CopySegmentsKernel<<<blocks, kCopyThreads, 0, stream>>>(segs, begin, end, done);
  return cudaGetLastError();
}

cudaError_t LaunchSignal(uint64_t* done, uint64_t value, cudaStream_t stream) {
  SignalKernel<<<1, 1, 0, stream>>>(done, value);
  return cudaGetLastError();
}

}  // namespace kvlane::gpu
