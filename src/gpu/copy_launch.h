// Plain launchers for the copy kernels: raw pointers and a stream, no device
// code. Host code includes only this header (and copy_types.h).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "gpu/copy_types.h"

namespace kvlane::gpu {

inline constexpr int kCopyThreads = 512;

// Copies segs[begin, end) (device memory) with `blocks` blocks of kCopyThreads
// threads, 16-byte loads and stores where both sides allow, then signals `done`.
// REQUIRES: blocks >= 1; begin < end.
cudaError_t LaunchCopySegments(const CopySeg* segs, uint32_t begin, uint32_t end, int blocks,
                               const CopyDone& done, cudaStream_t stream);

// Stores `value` into `*done` (pinned host) after everything before it on `stream`.
cudaError_t LaunchSignal(uint64_t* done, uint64_t value, cudaStream_t stream);

}  // namespace kvlane::gpu
