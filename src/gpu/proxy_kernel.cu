// The resident proxy of a cuda lane: a persistent kernel (a few blocks) that
// polls the lane's ring of entries in pinned host memory, copies each entry's
// segments with 16-byte vectors and stores its completion word into pinned host
// memory after a system fence. It stops copying (but still acknowledges entries,
// marked skipped) once the host latched an error or it raised one itself, and
// returns on an exit entry. No launch per request: small transfers cost one
// PCIe poll, the copy and one PCIe store.
#include <cuda_runtime.h>

#include "gpu/copy_device.cuh"
#include "gpu/copy_launch.h"

namespace kvlane::gpu {
namespace {

enum Cmd : int { kCmdCopy = 0, kCmdSkip = 1, kCmdExit = 2 };
constexpr uint32_t kErrInjected = 1, kErrBadEntry = 2;

__device__ __forceinline__ uint64_t LoadSys64(const void* p) {
  uint64_t v;
  asm volatile("ld.relaxed.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ uint32_t LoadSys32(const void* p) {
  uint32_t v;
  asm volatile("ld.relaxed.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void StoreSys32(uint32_t* p, uint32_t v) {
  __threadfence_system();
  *reinterpret_cast<volatile uint32_t*>(p) = v;
}

__device__ bool ValidEntry(const ProxyEntry& e) {
  if (e.op == kProxyExit) return true;
  if (e.op != kProxyCopy || e.seg_begin >= e.seg_end) return false;
  const uint32_t n = e.seg_end - e.seg_begin;
  return n == 1 ? e.seg.len > 0 : e.segs != 0 && n <= kProxyMaxSegs;
}

// Warp 0: waits for entry `n`, copying it into shared memory with one 64-byte
// read per poll (lanes 0-7) while lanes 8-11 read the control flags. Raises
// the GPU-side error and mirrors the host latch. Sets *cmd.
__device__ void Poll(const ProxyArgs& a, uint64_t n, ProxyEntry* e, CopySeg* staged, int* cmd,
                     uint32_t* failed, uint32_t* saw) {
  const unsigned lane = threadIdx.x;
  const auto* src = reinterpret_cast<const uint64_t*>(&a.ring[n % kProxyRing]);
  auto* words = reinterpret_cast<uint64_t*>(e);
  for (;;) {
    uint64_t w = 0;
    uint32_t f = 0;
    if (lane < 8) w = LoadSys64(src + lane);
    else if (lane < 10) f = LoadSys32(reinterpret_cast<const uint32_t*>(a.ctl) + (lane - 8));
    const uint32_t latched = __shfl_sync(0xffffffffu, f, 8);
    const uint32_t inject = __shfl_sync(0xffffffffu, f, 9);
    if (lane < 8) words[lane] = w;
    __syncwarp();
    if (inject != 0 && *failed == 0) {
      *failed = kErrInjected;
      if (lane == 0) StoreSys32(&a.ctl->gpu_error, kErrInjected);
    }
    if (latched != 0 && *saw == 0) {
      *saw = 1;
      if (lane == 0) StoreSys32(&a.ctl->saw_latch, 1);
    }
    const bool here = e->ready == n + 1 && e->check == ProxyCheck(*e);
    __syncwarp();
    if (!here) continue;  // not written yet, or a torn read: poll again
    if (!ValidEntry(*e) && *failed == 0) {
      *failed = kErrBadEntry;
      if (lane == 0) StoreSys32(&a.ctl->gpu_error, kErrBadEntry);
    }
    const int c = e->op == kProxyExit ? kCmdExit : (*failed != 0 || *saw != 0) ? kCmdSkip : kCmdCopy;
    if (c == kCmdCopy && e->seg_end - e->seg_begin > 1) {
      // The list was written before `ready`: the fence makes the relaxed read of
      // `ready` an acquire for the reads below.
      __threadfence_system();
      const uint32_t words = (e->seg_end - e->seg_begin) * 3;
      const auto* list = reinterpret_cast<const uint64_t*>(e->segs);
      for (uint32_t i = lane; i < words; i += 32) reinterpret_cast<uint64_t*>(staged)[i] = LoadSys64(list + i);
      __syncwarp();
    }
    if (lane == 0) *cmd = c;
    return;
  }
}

__device__ void CopyEntry(const ProxyEntry& e, const CopySeg* staged) {
  const uint64_t rank = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  const uint64_t n = uint64_t{gridDim.x} * blockDim.x;
  if (e.seg_end - e.seg_begin == 1) {
    CopyRange(e.seg.dst, e.seg.src, e.seg.len, rank, n);
    return;
  }
  for (uint32_t i = 0; i < e.seg_end - e.seg_begin; ++i) CopyRange(staged[i].dst, staged[i].src, staged[i].len, rank, n);
}

// Publishes entry number `n` (the `k`-th of this launch): with several blocks
// the last to arrive stores the word; a skip by any block marks it skipped.
__device__ void Finish(const ProxyArgs& a, const ProxyEntry& e, uint64_t k, bool skip) {
  if (skip && threadIdx.x == 0) atomicOr(&a.scratch->skipped, 1u);
  // The barrier orders every thread's copies before thread 0's system fence
  // (in StoreSystem), which is cumulative: one fence instead of one per thread.
  __syncthreads();
  if (threadIdx.x != 0) return;
  uint64_t* word = &a.done[(e.value - 1) % kProxyRing];
  if (gridDim.x == 1) {
    StoreSystem(word, skip ? e.value | kDoneSkipped : e.value);
    return;
  }
  __threadfence();
  if (atomicAdd(&a.scratch->arrivals, 1ull) + 1 != a.arrivals_base + (k + 1) * gridDim.x) return;
  const bool any_skip = atomicOr(&a.scratch->skipped, 0u) != 0;
  StoreSystem(word, any_skip ? e.value | kDoneSkipped : e.value);
}

// A successor reports that it runs, then waits until the host hands it the
// ring: the entry number where its predecessor stopped.
__device__ uint64_t FirstEntry(const ProxyArgs& a) {
  if (a.handover == 0) return a.start;
  StoreSys32(&a.ctl->alive[a.slot], 1);
  for (;;) {
    const uint64_t s = LoadSys64(&a.ctl->start[a.slot]);
    if (s != 0) return s - 1;
  }
}

__global__ void __launch_bounds__(kProxyThreads) ProxyKernel(ProxyArgs a) {
  __shared__ ProxyEntry entry;
  __shared__ CopySeg staged[kProxyMaxSegs];
  __shared__ int cmd;
  __shared__ uint64_t first;
  if (threadIdx.x == 0) first = FirstEntry(a);
  __syncthreads();
  uint32_t failed = 0, saw = 0;  // warp 0's view of the error flags
  for (uint64_t n = first;; ++n) {
    if (threadIdx.x < 32) Poll(a, n, &entry, staged, &cmd, &failed, &saw);
    __syncthreads();
    const int c = cmd;
    if (c == kCmdExit) return;
    if (c == kCmdCopy) CopyEntry(entry, staged);
    Finish(a, entry, n - first, c == kCmdSkip);
    __syncthreads();  // everyone is done with `entry` before warp 0 overwrites it
  }
}

}  // namespace

cudaError_t LaunchProxy(const ProxyArgs& args, int blocks, cudaStream_t stream) {
  ProxyKernel<<<blocks, kProxyThreads, 0, stream>>>(args);
  return cudaGetLastError();
}

}  // namespace kvlane::gpu
