// The bulk copy kernel of the cuda transport: one launch moves every segment of
// a batch. Work is cut into units (a segment, or a part of a large one) and the
// grid has one block per unit, so the hardware block scheduler balances
// scattered lists; the last block to finish writes the completion word into
// pinned host memory.
#include <cuda_runtime.h>

#include "gpu/copy_device.cuh"
#include "gpu/copy_launch.h"

namespace kvlane::gpu {
namespace {

constexpr uint64_t kPartAlign = 4096;  // parts of a split segment start on this

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
  StoreSystem(done.done, done.value);
}

__global__ void __launch_bounds__(kCopyThreads)
    CopySegmentsKernel(const CopySeg* __restrict__ segs, uint32_t begin, uint32_t end,
                       uint32_t parts, CopyDone done) {
  const uint64_t units = uint64_t{end - begin} * parts;
  for (uint64_t u = blockIdx.x; u < units; u += gridDim.x) {
    const CopySeg sg = segs[begin + u / parts];
    const uint32_t part = static_cast<uint32_t>(u % parts);
    uint64_t piece = (sg.len + parts - 1) / parts;
    piece = (piece + kPartAlign - 1) / kPartAlign * kPartAlign;
    const uint64_t off = uint64_t{part} * piece;
    if (off < sg.len) CopyRange(sg.dst + off, sg.src + off, min(piece, sg.len - off), threadIdx.x, blockDim.x);
  }
  SignalWhenLast(done);
}

__global__ void SignalKernel(uint64_t* done, uint64_t value) { StoreSystem(done, value); }

}  // namespace

cudaError_t LaunchCopySegments(const CopySeg* segs, uint32_t begin, uint32_t end, uint32_t parts,
                               int blocks, const CopyDone& done, cudaStream_t stream) {
  CopySegmentsKernel<<<blocks, kCopyThreads, 0, stream>>>(segs, begin, end, parts, done);
  return cudaGetLastError();
}

cudaError_t LaunchSignal(uint64_t* done, uint64_t value, cudaStream_t stream) {
  SignalKernel<<<1, 1, 0, stream>>>(done, value);
  return cudaGetLastError();
}

}  // namespace kvlane::gpu
