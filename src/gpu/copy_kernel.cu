// The bulk copy kernel of the cuda transport: one launch moves every segment of
// a batch. Work is cut into units (a segment, or a part of a large one) and the
// grid has one block per unit, so the hardware block scheduler balances
// scattered lists; the last block to finish writes the completion word into
// pinned host memory.
#include <cuda_runtime.h>

#include <mutex>

#include "gpu/copy_device.cuh"
#include "gpu/copy_launch.h"
#include "gpu/tma_copy.cuh"

namespace kvlane::gpu {
namespace {

constexpr uint64_t kPartAlign = 4096;  // parts of a split segment start on this

// The last block (by arrival) publishes completion. The barrier orders every
// thread's stores before thread 0's fence, which is cumulative (as in the
// proxy's Finish): one fence per block instead of one per thread, so the block
// leaves its multiprocessor sooner. On one H100, over 6,146 scattered
// descriptors of 37,440 B, a system fence in every thread ran at 0.74 x the
// copy with no fence, one in thread 0 at 0.99 x (cuda_bench's fence probes,
// session 31; on an H200 the per-thread fence had cost little). The last block's
// system fence (StoreRecordAndDone) then orders all of them before `done` for
// every observer.
__device__ void SignalWhenLast(const CopyDone& done, BlockFence fence) {
  __syncthreads();
  if (threadIdx.x != 0) return;
  if (fence == BlockFence::kDevice)
    __threadfence();
  else
    __threadfence_system();
  unsigned prev = atomicAdd(done.blocks_finished, 1u);
  if (prev != gridDim.x - 1) return;
  *done.blocks_finished = 0;  // the next launch on this stream starts from zero
  StoreRecordAndDone(done.record, done.record_value, done.done, done.value);
}

// At most 32 registers (30 with the thread count a constant), so that a
// multiprocessor holds 2048 / kCopyThreads blocks: at 40 it held one block
// fewer, and a pull of a scattered list lost ~3 % of its rate for the loads
// that block would have had in flight (cuda_staged_probe, session 7).
// REQUIRES: blockDim.x == kCopyThreads.
__global__ void __launch_bounds__(kCopyThreads, 2048 / kCopyThreads)
    CopySegmentsKernel(const CopySeg* __restrict__ segs, uint32_t begin, uint32_t end,
                       uint32_t parts, CopyDone done, BlockFence fence) {
  const uint64_t units = uint64_t{end - begin} * parts;
  for (uint64_t u = blockIdx.x; u < units; u += gridDim.x) {
    const CopySeg sg = segs[begin + u / parts];
    const uint32_t part = static_cast<uint32_t>(u % parts);
    uint64_t piece = (sg.len + parts - 1) / parts;
    piece = (piece + kPartAlign - 1) / kPartAlign * kPartAlign;
    const uint64_t off = uint64_t{part} * piece;
    if (off < sg.len)
      CopyRange(sg.dst + off, sg.src + off, min(piece, sg.len - off), threadIdx.x, kCopyThreads);
  }
  SignalWhenLast(done, fence);
}

// One unit of the bulk-copy kernel: up to kTmaStages stages of kTmaStageBytes,
// all loads issued at once by thread 0, each stored as soon as it landed; the
// unaligned head and tail (and a misaligned pair) go through the threads.
__device__ void TmaUnit(uint8_t* dst, const uint8_t* src, uint64_t len, uint8_t* stage, uint64_t* bars,
                        uint32_t* phase) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ < 900
  CopyRange(reinterpret_cast<uint64_t>(dst), reinterpret_cast<uint64_t>(src), len, threadIdx.x, blockDim.x);
  return;  // no bulk copies before Hopper
#endif
  if (((reinterpret_cast<uintptr_t>(dst) ^ reinterpret_cast<uintptr_t>(src)) & 15) != 0) {
    CopyRange(reinterpret_cast<uint64_t>(dst), reinterpret_cast<uint64_t>(src), len, threadIdx.x, blockDim.x);
    return;
  }
  const uint64_t head = min(len, (16 - (reinterpret_cast<uintptr_t>(dst) & 15)) & 15);
  const uint64_t body = (len - head) & ~uint64_t{15};
  const uint64_t tail_at = head + body;
  for (uint64_t i = threadIdx.x; i < head; i += blockDim.x) dst[i] = src[i];
  for (uint64_t i = tail_at + threadIdx.x; i < len; i += blockDim.x) dst[i] = src[i];
  if (threadIdx.x != 0 || body == 0) return;
  const int n = static_cast<int>((body + kTmaStageBytes - 1) / kTmaStageBytes);
  for (int k = 0; k < n; ++k) {
    const uint64_t off = head + uint64_t{static_cast<uint32_t>(k)} * kTmaStageBytes;
    BulkLoad(stage + k * kTmaStageBytes, src + off, static_cast<uint32_t>(min(uint64_t{kTmaStageBytes}, tail_at - off)),
             &bars[k]);
  }
  for (int k = 0; k < n; ++k) {
    const uint64_t off = head + uint64_t{static_cast<uint32_t>(k)} * kTmaStageBytes;
    MbarWait(&bars[k], (*phase >> k) & 1);
    *phase ^= 1u << k;
    BulkStore(dst + off, stage + k * kTmaStageBytes, static_cast<uint32_t>(min(uint64_t{kTmaStageBytes}, tail_at - off)));
  }
  BulkStoreWaitAll();  // the stages are reused by the next unit
}

__global__ void __launch_bounds__(kTmaThreads)
    CopySegmentsTmaKernel(const CopySeg* __restrict__ segs, uint32_t begin, uint32_t end,
                          uint32_t parts, CopyDone done, BlockFence fence) {
  extern __shared__ __align__(128) uint8_t stage[];
  __shared__ uint64_t bars[kTmaStages];
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (threadIdx.x == 0) {
    for (int k = 0; k < kTmaStages; ++k) MbarInit(&bars[k], 1);
    FenceBarrierInit();
  }
#endif
  __syncthreads();
  uint32_t phase = 0;  // thread 0: parity of each stage's barrier
  const uint64_t units = uint64_t{end - begin} * parts;
  for (uint64_t u = blockIdx.x; u < units; u += gridDim.x) {
    const CopySeg sg = segs[begin + u / parts];
    const uint64_t off = (u % parts) * kTmaUnitBytes;
    if (off < sg.len)
      TmaUnit(reinterpret_cast<uint8_t*>(sg.dst + off), reinterpret_cast<const uint8_t*>(sg.src + off),
              min(kTmaUnitBytes, sg.len - off), stage, bars, &phase);
  }
  SignalWhenLast(done, fence);
}

__global__ void SignalKernel(CopyDone done) {
  StoreRecordAndDone(done.record, done.record_value, done.done, done.value);
}

}  // namespace

cudaError_t LaunchCopySegments(const CopySeg* segs, uint32_t begin, uint32_t end, uint32_t parts,
                               int blocks, const CopyDone& done, BlockFence fence,
                               cudaStream_t stream) {
  CopySegmentsKernel<<<blocks, kCopyThreads, 0, stream>>>(segs, begin, end, parts, done, fence);
  return cudaGetLastError();
}

cudaError_t LaunchCopySegmentsTma(const CopySeg* segs, uint32_t begin, uint32_t end, uint32_t parts,
                                  int blocks, const CopyDone& done, BlockFence fence,
                                  cudaStream_t stream) {
  constexpr int kSmem = kTmaStages * kTmaStageBytes;
  // The attribute is the current device's: set once per device that launches.
  constexpr int kMaxDevices = 64;
  static std::once_flag once[kMaxDevices];
  static cudaError_t attr[kMaxDevices];
  int device = 0;
  if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
  if (device < 0 || device >= kMaxDevices) return cudaErrorInvalidDevice;
  std::call_once(once[device], [&] {
    attr[device] = cudaFuncSetAttribute(CopySegmentsTmaKernel,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
  });
  if (attr[device] != cudaSuccess) return attr[device];
  CopySegmentsTmaKernel<<<blocks, kTmaThreads, kSmem, stream>>>(segs, begin, end, parts, done,
                                                                fence);
  return cudaGetLastError();
}

cudaError_t LaunchSignal(const CopyDone& done, cudaStream_t stream) {
  SignalKernel<<<1, 1, 0, stream>>>(done);
  return cudaGetLastError();
}

}  // namespace kvlane::gpu
