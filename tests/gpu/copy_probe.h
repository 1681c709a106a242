// Probe kernels for cuda_bench (not used by the transport): variants of the
// scattered-list copy loop, to see which cut of threads, bytes in flight and
// store hints moves 37,440-byte descriptors over NVLink fastest.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "gpu/copy_types.h"

namespace kvlane::test {

struct ProbeVariant {
  const char* name;
  int threads;    // per block; one block per segment
  int unroll;     // 16-byte vectors in flight per thread
  bool streaming; // st.global.cs stores (evict-first) instead of plain stores
};

inline constexpr ProbeVariant kProbeVariants[] = {
    {"t512 u4", 512, 4, false},   {"t512 u8", 512, 8, false},    {"t256 u10", 256, 10, false},
    {"t1024 u3", 1024, 3, false}, {"t512 u4 cs", 512, 4, true},  {"t256 u10 cs", 256, 10, true},
};

// One block per segment of segs[0, n) (device memory); every segment 16-byte
// aligned on both sides. Returns the launch error.
cudaError_t LaunchProbe(const ProbeVariant& v, const gpu::CopySeg* segs, uint32_t n, cudaStream_t stream);

// How the fence probe's blocks end (the copy kernel's loop, one block per
// segment of 512 threads, then a count of finished blocks in `*blocks_finished`,
// device memory, which the probe's last block resets).
enum class ProbeFence : int {
  kNone,       // no fence: the copy alone
  kSystemAll,  // every thread fence.sc.sys, then the barrier (the kernel before session 31)
  kSystemOne,  // the barrier, then thread 0's fence.sc.sys (cumulative)
  kDeviceOne,  // the barrier, then thread 0's fence.sc.gpu
};
inline constexpr struct {
  ProbeFence fence;
  const char* name;
} kProbeFences[] = {{ProbeFence::kNone, "none"},
                    {ProbeFence::kSystemAll, "sys every thread"},
                    {ProbeFence::kSystemOne, "sys thread 0"},
                    {ProbeFence::kDeviceOne, "gpu thread 0"}};
cudaError_t LaunchFenceProbe(ProbeFence fence, const gpu::CopySeg* segs, uint32_t n,
                             uint32_t* blocks_finished, cudaStream_t stream);

// One block of kCopyThreads per segment of segs[0, n), one byte per thread per
// step (the copy kernel's loop for misaligned pairs before session 37).
cudaError_t LaunchByteLoopProbe(const gpu::CopySeg* segs, uint32_t n, cudaStream_t stream);

}  // namespace kvlane::test
