// Per-transfer state of the cuda transport, built once on a transfer's first
// post: its segments resolved to addresses the executing GPU can dereference
// and uploaded to device memory, so that every post is one launch.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "gpu/copy_types.h"
#include "kvlane/status.h"

namespace kvlane::core {

// A peer's piece as this channel reaches it. Never freed before the channel.
struct RemotePiece {
  uint64_t key = 0;
  uint64_t base = 0;     // peer's virtual address of the piece
  uint64_t len = 0;
  uint64_t mapped = 0;   // device-accessible address of `base` in this process
  // The piece is memory of the channel's own GPU (a peer process or agent
  // sharing it), as CUDA reports `mapped`, never as the peer says: a WRITE
  // into it needs only a device-scope fence (XferTable::dst_on_device).
  bool on_device = false;
  std::atomic<bool> revoked{false};  // set by the peer's revocation (seq_cst: see HandleRevoke)
};

struct XferTable {
  XferTable() = default;
  ~XferTable();
  XferTable(const XferTable&) = delete;
  XferTable& operator=(const XferTable&) = delete;

  int device = 0;                       // the GPU that holds `segs` and runs the copies
  gpu::CopySeg* segs = nullptr;         // device memory: the uploaded table
  std::vector<gpu::CopySeg> host_segs;  // host copy (copy-engine path)
  std::vector<uint32_t> contig_end;     // end of the address-contiguous run starting at i
  uint64_t max_len = 0;                 // longest segment (copy kernel work units)
  bool pooled = false;                  // `segs` is from cudaMallocAsync (freed without a device sync)
  bool dst_on_device = false;  // every destination is memory of `device` (gpu::BlockFence::kDevice)
  std::vector<RemotePiece*> pieces;     // distinct peer pieces the transfer touches
  Status error;                         // set when the build failed: every post ends with it
};

// Fills contig_end and max_len from host_segs.
void ComputeRuns(XferTable* t);

}  // namespace kvlane::core
