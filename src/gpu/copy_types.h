// Plain structs shared by host code and the copy kernels. POD only; every
// pointer-sized field says on which side its memory lives.
#pragma once

#include <cstdint>

namespace kvlane::gpu {

// One contiguous copy of a prepared transfer, already resolved to addresses the
// executing GPU can dereference (its own memory, a peer GPU's memory opened
// through IPC or peer access, or pinned host memory).
struct CopySeg {
  uint64_t src;  // device-accessible address (local GPU, peer GPU or pinned host)
  uint64_t dst;  // device-accessible address (local GPU, peer GPU or pinned host)
  uint64_t len;  // bytes, > 0
};

// Completion of one launch: the last block to finish stores `value` into `*done`
// after a system-scope fence, so a host thread polling `done` sees the data.
struct CopyDone {
  uint32_t* blocks_finished;  // device memory, one word per stream; 0 between launches
  uint64_t* done;             // pinned host memory (mapped); written by the GPU
  uint64_t value;             // what the host waits for
};

}  // namespace kvlane::gpu
