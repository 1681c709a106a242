// Plain launchers for the copy kernels: raw pointers and a stream, no device
// code. Host code includes only this header (and copy_types.h).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "gpu/copy_types.h"

namespace kvlane::gpu {

inline constexpr int kCopyThreads = 512;    // threads per block of the bulk copy kernel
inline constexpr int kProxyThreads = 1024;  // threads per block of the resident proxy

// Copies segs[begin, end) (device memory) with `blocks` blocks of kCopyThreads
// threads, 16-byte loads and stores where both sides allow, then signals `done`.
// Each segment is cut into `parts` units; block b takes units b, b + blocks, ...
// REQUIRES: blocks >= 1; parts >= 1; begin < end.
cudaError_t LaunchCopySegments(const CopySeg* segs, uint32_t begin, uint32_t end, uint32_t parts,
                               int blocks, const CopyDone& done, cudaStream_t stream);

// Stores `value` into `*done` (pinned host) after everything before it on `stream`.
cudaError_t LaunchSignal(uint64_t* done, uint64_t value, cudaStream_t stream);

// Starts a lane's resident proxy (`blocks` blocks) serving ring entries from
// args.start on; it returns after an exit entry. Zeroes args.scratch first.
// REQUIRES: blocks >= 1; nothing else runs on `stream` until it returns.
cudaError_t LaunchProxy(const ProxyArgs& args, int blocks, cudaStream_t stream);

}  // namespace kvlane::gpu
