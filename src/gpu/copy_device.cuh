// Device helpers shared by the copy kernels: a byte range copied by `n`
// cooperating threads (this one is number `rank`) with 16-byte vectors.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace kvlane::gpu {

inline constexpr int kUnroll = 4;  // 16-byte vectors in flight per thread (the copy kernel's)

// 16-byte body with byte head and tail, kU vectors in flight per thread.
// REQUIRES: dst and src congruent mod 16.
template <int kU = kUnroll>
__device__ __forceinline__ void CopyAligned(uint8_t* dst, const uint8_t* src, uint64_t len,
                                            uint64_t rank, uint64_t n) {
  uint64_t head = min(len, (16 - (reinterpret_cast<uintptr_t>(dst) & 15)) & 15);
  for (uint64_t i = rank; i < head; i += n) dst[i] = src[i];
  const uint64_t nv = (len - head) / 16;
  uint4* d = reinterpret_cast<uint4*>(dst + head);
  const uint4* s = reinterpret_cast<const uint4*>(src + head);
  for (uint64_t base = rank; base < nv; base += n * kU) {
    uint4 v[kU];
#pragma unroll
    for (int k = 0; k < kU; ++k) {
      uint64_t i = base + k * n;
      if (i < nv) v[k] = s[i];
    }
#pragma unroll
    for (int k = 0; k < kU; ++k) {
      uint64_t i = base + k * n;
      if (i < nv) d[i] = v[k];
    }
  }
  for (uint64_t i = head + nv * 16 + rank; i < len; i += n) dst[i] = src[i];
}

template <int kU = kUnroll>
__device__ __forceinline__ void CopyRange(uint64_t dst, uint64_t src, uint64_t len, uint64_t rank,
                                          uint64_t n) {
  auto* d = reinterpret_cast<uint8_t*>(dst);
  const auto* s = reinterpret_cast<const uint8_t*>(src);
  if (((dst ^ src) & 15) == 0) {
    CopyAligned<kU>(d, s, len, rank, n);
  } else {
    for (uint64_t i = rank; i < len; i += n) d[i] = s[i];
  }
}

// A relaxed load at system scope: each call reads memory another agent (the
// host, a peer GPU) may be writing, never a cached copy.
__device__ __forceinline__ uint64_t LoadSys64(const void* p) {
  uint64_t v;
  asm volatile("ld.relaxed.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
// A relaxed load at device scope: a word another kernel on this GPU writes
// (an L2 read).
__device__ __forceinline__ uint32_t LoadGpu32(const void* p) {
  uint32_t v;
  asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ uint32_t LoadSys32(const void* p) {
  uint32_t v;
  asm volatile("ld.relaxed.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// A relaxed store at system scope, with no fence: for a flag that orders
// nothing this thread wrote before. A system fence on another SM can slow a
// proxy polling the host: a launch every 1 ms whose one thread made a fenced
// store put 10-21 of the ~95 4 KiB requests of the 5-10 us after the launch
// call over 5 us, against 0-1 for the same launch without the store (session
// 9's cuda_renewal_probe, first round of runs 7-9; in the second rounds even
// the launch alone did, 8-23).
__device__ __forceinline__ void StoreRelaxedSys64(uint64_t* p, uint64_t v) {
  asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

// A request's terminal record (when `record` is set) and the lane's completion
// word, both after everything this thread wrote before, behind one system fence:
// a second fence between them would cost as much as the first. They may land in
// either order; the host waits for both (see CopyDone). The fence costs ~0.55 us
// on H200 with nothing before it and ~1 us after a 4 KiB write to a peer GPU;
// an acquire-release fence or a release store cost the same (cuda_doorbell_probe).
//
// `device_scope`: a device-scope fence instead, which costs ~0.3 us less after
// a 4 KiB copy (cuda_poll_depth_probe). Only when every earlier write this
// fence orders went to this GPU's own memory: every reader of that memory (its
// SMs, its copy engines, a peer over NVLink or PCIe) goes through this GPU's
// L2, which the device-scope fence waits for before the stores below leave.
__device__ __forceinline__ void StoreRecordAndDone(uint64_t* record, uint64_t record_value,
                                                   uint64_t* done, uint64_t value,
                                                   bool device_scope = false) {
  if (device_scope)
    __threadfence();
  else
    __threadfence_system();
  if (record != nullptr) *reinterpret_cast<volatile uint64_t*>(record) = record_value;
  *reinterpret_cast<volatile uint64_t*>(done) = value;
}

}  // namespace kvlane::gpu
