// Plain launchers for the copy kernels: raw pointers and a stream, no device
// code. Host code includes only this header (and copy_types.h).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "gpu/copy_types.h"

namespace kvlane::gpu {

inline constexpr int kCopyThreads = 512;    // threads per block of the bulk copy kernel
// Threads per block of the resident proxy: 512 with 8 vectors in flight each
// move its largest entry by default (64 KiB) in one round; 1,024 threads made
// a 4 KiB entry ~0.15 us slower (block barriers, issue slots; session 8's
// cuda_proxy_phase_probe).
inline constexpr int kProxyThreads = 512;

// How each block of a copy kernel makes its stores visible before it counts
// itself finished; the last block then fences at system scope and signals.
// kDevice (fence.sc.gpu) suffices when every destination is the executing
// GPU's own memory: every reader of it, the host and peer GPUs included, goes
// through this GPU's L2, which the fence reaches. A destination anywhere else
// (a peer GPU, host memory) needs kSystem (fence.sc.sys), which waits for the
// stores to land there. Each block fences once, in thread 0 after a barrier
// (cumulative). For a pull the system fence costs ~3 % of a scattered
// list's rate (cuda_staged_probe, session 7, H200); for a push ~0.5 % there.
enum class BlockFence : uint32_t { kSystem, kDevice };

// Copies segs[begin, end) (device memory) with `blocks` blocks of kCopyThreads
// threads, 16-byte loads and stores where both sides allow, then signals `done`.
// Each segment is cut into `parts` units; block b takes units b, b + blocks, ...
// REQUIRES: blocks >= 1; parts >= 1; begin < end; fence == kDevice only when
// every destination is memory of the GPU `stream` belongs to.
cudaError_t LaunchCopySegments(const CopySeg* segs, uint32_t begin, uint32_t end, uint32_t parts,
                               int blocks, const CopyDone& done, BlockFence fence,
                               cudaStream_t stream);

// The same with Hopper bulk copies (TMA): units of kTmaUnitBytes, each staged
// through shared memory in kTmaStages pieces by one thread of a small block.
// `parts` = units per segment (ceil(longest segment / kTmaUnitBytes)). Not used
// by the transport: measured slower than LaunchCopySegments on NVLink (0.87 vs
// 0.91 of the copy engine, docs/perf/2026-11-30-cuda.md); the benchmark probes it.
inline constexpr int kTmaThreads = 32;
inline constexpr int kTmaStages = 3;
inline constexpr uint32_t kTmaStageBytes = 16u << 10;
inline constexpr uint64_t kTmaUnitBytes = uint64_t{kTmaStages} * kTmaStageBytes;
cudaError_t LaunchCopySegmentsTma(const CopySeg* segs, uint32_t begin, uint32_t end, uint32_t parts,
                                  int blocks, const CopyDone& done, BlockFence fence,
                                  cudaStream_t stream);

// Stores done.record_value into *done.record (when set), then done.value into
// *done.done (pinned host), after everything before it on `stream`
// (done.blocks_finished unused).
cudaError_t LaunchSignal(const CopyDone& done, cudaStream_t stream);

// Launches generation args.gen of a lane's resident proxy (`blocks` blocks): it
// serves the ring from the hand-off record of generation args.gen - 1 until it
// stops (see ProxyCtl). One kernel launch and nothing else (no memset: see
// ProxyScratch). REQUIRES: blocks >= 1; `stream` runs only this proxy's
// launches of one parity, args.scratch is that stream's.
cudaError_t LaunchProxy(const ProxyArgs& args, int blocks, cudaStream_t stream);

}  // namespace kvlane::gpu
