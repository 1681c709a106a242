#include "copy_probe.h"

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

}  // namespace

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
