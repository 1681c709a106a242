// Device helpers shared by the copy kernels: a byte range copied by `n`
// cooperating threads (this one is number `rank`) in vectors, and the loads
// and stores that talk to the host.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace kvlane::gpu {

inline constexpr int kUnroll = 4;  // 16-byte vectors in flight per thread (the copy kernel's)

// A body of V-sized vectors with byte head and tail, kN vectors in flight per
// thread. REQUIRES: dst and src congruent mod sizeof(V).
template <typename V, int kN>
__device__ __forceinline__ void CopyVectors(uint8_t* dst, const uint8_t* src, uint64_t len,
                                            uint64_t rank, uint64_t n) {
  constexpr uint64_t kW = sizeof(V);
  const uint64_t head = min(len, (kW - (reinterpret_cast<uintptr_t>(dst) & (kW - 1))) & (kW - 1));
  for (uint64_t i = rank; i < head; i += n) dst[i] = src[i];
  const uint64_t nv = (len - head) / kW;
  V* d = reinterpret_cast<V*>(dst + head);
  const V* s = reinterpret_cast<const V*>(src + head);
  for (uint64_t base = rank; base < nv; base += n * kN) {
    V v[kN];
#pragma unroll
    for (int k = 0; k < kN; ++k) {
      uint64_t i = base + k * n;
      if (i < nv) v[k] = s[i];
    }
#pragma unroll
    for (int k = 0; k < kN; ++k) {
      uint64_t i = base + k * n;
      if (i < nv) d[i] = v[k];
    }
  }
  for (uint64_t i = head + nv * kW + rank; i < len; i += n) dst[i] = src[i];
}

// dst and src not congruent mod 4: each 4-byte word of dst (after a byte head)
// is cut from the two aligned source words its bytes lie in (a funnel shift).
// Both of those words hold bytes of the range (the range's bytes straddle them),
// so nothing outside the range's own aligned words is read. kN words in flight.
// REQUIRES: ((dst ^ src) & 3) != 0.
template <int kN>
__device__ __forceinline__ void CopyShifted(uint8_t* dst, const uint8_t* src, uint64_t len,
                                            uint64_t rank, uint64_t n) {
  const uint64_t head = min(len, (4 - (reinterpret_cast<uintptr_t>(dst) & 3)) & 3);
  for (uint64_t i = rank; i < head; i += n) dst[i] = src[i];
  const uint64_t nw = (len - head) / 4;
  uint32_t* d = reinterpret_cast<uint32_t*>(dst + head);
  const uintptr_t s = reinterpret_cast<uintptr_t>(src + head);
  const uint32_t* w = reinterpret_cast<const uint32_t*>(s & ~uintptr_t{3});
  const uint32_t shift = static_cast<uint32_t>(s & 3) * 8;  // 8, 16 or 24
  for (uint64_t base = rank; base < nw; base += n * kN) {
    uint32_t v[kN];
#pragma unroll
    for (int k = 0; k < kN; ++k) {
      uint64_t i = base + k * n;
      if (i < nw) v[k] = __funnelshift_r(w[i], w[i + 1], shift);
    }
#pragma unroll
    for (int k = 0; k < kN; ++k) {
      uint64_t i = base + k * n;
      if (i < nw) d[i] = v[k];
    }
  }
  for (uint64_t i = head + nw * 4 + rank; i < len; i += n) dst[i] = src[i];
}

// The paths of CopyRange for addresses not congruent mod 16: 8- or 4-byte
// vectors where the addresses are congruent mod those, else funnel-shifted
// words. Out of line, with half the vectors in flight, so that the aligned
// path keeps its registers (the copy kernel's bound is 32; with these paths
// inline it spilled, ptxas -v).
template <int kN>
__device__ __noinline__ void CopyMisaligned(uint8_t* d, const uint8_t* s, uint64_t len,
                                            uint64_t rank, uint64_t n) {
  const uint64_t x = reinterpret_cast<uintptr_t>(d) ^ reinterpret_cast<uintptr_t>(s);
  if ((x & 7) == 0)
    CopyVectors<uint2, kN>(d, s, len, rank, n);
  else if ((x & 3) == 0)
    CopyVectors<uint32_t, kN>(d, s, len, rank, n);
  else
    CopyShifted<kN>(d, s, len, rank, n);
}

// `len` bytes from src to dst by `n` cooperating threads (this one is number
// `rank`): 16-byte vectors where the two addresses are congruent mod 16 (kU in
// flight per thread), else CopyMisaligned.
template <int kU = kUnroll>
__device__ __forceinline__ void CopyRange(uint64_t dst, uint64_t src, uint64_t len, uint64_t rank,
                                          uint64_t n) {
  static_assert(kU >= 2 && kU % 2 == 0, "CopyMisaligned takes kU / 2 vectors in flight");
  auto* d = reinterpret_cast<uint8_t*>(dst);
  const auto* s = reinterpret_cast<const uint8_t*>(src);
  if (((dst ^ src) & 15) == 0)
    CopyVectors<uint4, kU>(d, s, len, rank, n);
  else
    CopyMisaligned<kU / 2>(d, s, len, rank, n);
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
