// Hopper bulk copies (TMA, cp.async.bulk) for the copy kernels: a byte range is
// moved global -> shared -> global by the tensor memory accelerator, issued by
// one thread, instead of 16-byte loads and stores by every thread. sm_90+.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace kvlane::gpu {

__device__ __forceinline__ uint32_t SmemAddr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void MbarInit(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(SmemAddr(bar)), "r"(count) : "memory");
}

// Makes initialized barriers visible to the async proxy (the bulk copy unit).
__device__ __forceinline__ void FenceBarrierInit() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// Global -> shared, `bytes` (multiple of 16, both addresses 16-byte aligned),
// completing on `bar` (which this thread arms for `bytes`).
__device__ __forceinline__ void BulkLoad(void* smem, const void* gmem, uint32_t bytes, uint64_t* bar) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(SmemAddr(bar)), "r"(bytes)
               : "memory");
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
          SmemAddr(smem)),
      "l"(gmem), "r"(bytes), "r"(SmemAddr(bar))
      : "memory");
}

__device__ __forceinline__ void MbarWait(uint64_t* bar, uint32_t parity) {
  uint32_t done = 0;
  while (!done) {
    asm volatile(
        "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
        : "=r"(done)
        : "r"(SmemAddr(bar)), "r"(parity)
        : "memory");
  }
}

// Shared -> global, same alignment rules; committed as its own bulk group.
__device__ __forceinline__ void BulkStore(void* gmem, const void* smem, uint32_t bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(gmem), "r"(SmemAddr(smem)),
               "r"(bytes)
               : "memory");
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}

// Waits until every committed bulk store of this thread has been performed.
// The proxy fence orders them before this thread's later generic-proxy
// accesses (the completion store that follows a system fence).
__device__ __forceinline__ void BulkStoreWaitAll() {
  asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
  asm volatile("fence.proxy.async.global;" ::: "memory");
}

}  // namespace kvlane::gpu
