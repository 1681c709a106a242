#include "copy_probe.h"
#include "gpu/copy_device.cuh"
#include "gpu/copy_launch.h"

namespace kvlane::test {
namespace {

template <int kUnroll, bool kStreaming>
__global__ void ProbeKernel(const gpu::CopySeg* __restrict__ segs) {
  const gpu::CopySeg sg = segs[blockIdx.x];
  const uint64_t nv = sg.len / 16;
  uint4* d = reinterpret_cast<uint4*>(sg.dst);
  const uint4* s = reinterpret_cast<const uint4*>(sg.src);
  const uint64_t n = blockDim.x;
  for (uint64_t base = threadIdx.x; base < nv; base += n * kUnroll) {
    uint4 v[kUnroll];
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
      const uint64_t i = base + k * n;
      if (i < nv) v[k] = __ldg(s + i);
    }
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
      const uint64_t i = base + k * n;
      if (i >= nv) continue;
      if constexpr (kStreaming) __stcs(d + i, v[k]);
      else d[i] = v[k];
    }
  }
}

template <int kUnroll, bool kStreaming>
cudaError_t Launch(int threads, const gpu::CopySeg* segs, uint32_t n, cudaStream_t stream) {
  ProbeKernel<kUnroll, kStreaming><<<n, threads, 0, stream>>>(segs);
  return cudaGetLastError();
}

template <ProbeFence kFence>
__global__ void __launch_bounds__(gpu::kCopyThreads, 2048 / gpu::kCopyThreads)
    FenceProbeKernel(const gpu::CopySeg* __restrict__ segs, uint32_t* blocks_finished) {
  const gpu::CopySeg sg = segs[blockIdx.x];
  gpu::CopyRange(sg.dst, sg.src, sg.len, threadIdx.x, gpu::kCopyThreads);
  if constexpr (kFence == ProbeFence::kNone) return;
  if constexpr (kFence == ProbeFence::kSystemAll) __threadfence_system();
  __syncthreads();
  if (threadIdx.x != 0) return;
  if constexpr (kFence == ProbeFence::kSystemOne) __threadfence_system();
  if constexpr (kFence == ProbeFence::kDeviceOne) __threadfence();
  if (atomicAdd(blocks_finished, 1u) == gridDim.x - 1) *blocks_finished = 0;
}

template <ProbeFence kFence>
cudaError_t LaunchFence(const gpu::CopySeg* segs, uint32_t n, uint32_t* fin, cudaStream_t stream) {
  FenceProbeKernel<kFence><<<n, gpu::kCopyThreads, 0, stream>>>(segs, fin);
  return cudaGetLastError();
}

// The copy kernel's loop for addresses not congruent mod 16 before session 37:
// one byte per thread per step.
__global__ void __launch_bounds__(gpu::kCopyThreads, 2048 / gpu::kCopyThreads)
    ByteLoopKernel(const gpu::CopySeg* __restrict__ segs) {
  const gpu::CopySeg sg = segs[blockIdx.x];
  auto* d = reinterpret_cast<uint8_t*>(sg.dst);
  const auto* s = reinterpret_cast<const uint8_t*>(sg.src);
  for (uint64_t i = threadIdx.x; i < sg.len; i += gpu::kCopyThreads) d[i] = s[i];
}

}  // namespace

cudaError_t LaunchByteLoopProbe(const gpu::CopySeg* segs, uint32_t n, cudaStream_t stream) {
  ByteLoopKernel<<<n, gpu::kCopyThreads, 0, stream>>>(segs);
  return cudaGetLastError();
}

cudaError_t LaunchFenceProbe(ProbeFence fence, const gpu::CopySeg* segs, uint32_t n,
                             uint32_t* blocks_finished, cudaStream_t stream) {
  switch (fence) {
    case ProbeFence::kNone:
      return LaunchFence<ProbeFence::kNone>(segs, n, blocks_finished, stream);
    case ProbeFence::kSystemAll:
      return LaunchFence<ProbeFence::kSystemAll>(segs, n, blocks_finished, stream);
    case ProbeFence::kSystemOne:
      return LaunchFence<ProbeFence::kSystemOne>(segs, n, blocks_finished, stream);
    case ProbeFence::kDeviceOne:
      return LaunchFence<ProbeFence::kDeviceOne>(segs, n, blocks_finished, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t LaunchProbe(const ProbeVariant& v, const gpu::CopySeg* segs, uint32_t n, cudaStream_t stream) {
  switch (v.unroll * 2 + (v.streaming ? 1 : 0)) {
    case 8: return Launch<4, false>(v.threads, segs, n, stream);
    case 9: return Launch<4, true>(v.threads, segs, n, stream);
    case 16: return Launch<8, false>(v.threads, segs, n, stream);
    case 20: return Launch<10, false>(v.threads, segs, n, stream);
    case 21: return Launch<10, true>(v.threads, segs, n, stream);
    case 6: return Launch<3, false>(v.threads, segs, n, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace kvlane::test
