// Per-transfer state of the cuda transport, built once on a transfer's first
// post: its segments resolved to addresses the executing GPU can dereference
// and uploaded to device memory, so that every post is one launch.
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "gpu/copy_types.h"
#include "kvlane/status.h"

namespace kvlane::core {

// A peer's piece as this channel reaches it. Held by the channel until the
// peer revokes it, and by every table that uses it.
struct RemotePiece {
  uint64_t key = 0;
  uint64_t base = 0;     // peer's virtual address of the piece
  uint64_t len = 0;
  uint64_t mapped = 0;  // device-accessible address of `base` in this process
  // Every byte of the piece is memory of the channel's own GPU (a peer sharing
  // it), mapped from this node for sure (never through a fabric handle, which may
  // name another node's GPU whose ordinal matches ours): a WRITE into it needs
  // only a device-scope fence (XferTable::dst_on_device). Looked up once, when
  // the piece is opened.
  bool on_device = false;
  std::atomic<bool> revoked{false};  // set by the peer's revocation (seq_cst: see HandleRevoke)
};

// What a table's stream-ordered free is ordered after: the kernel stream of
// every lane of its channel. The stream-ordered allocator may hand freed memory
// to the next cudaMallocAsync at once, so the free must follow in stream order
// every launch that read the table, not just on the host's clock (the host has
// seen each launch's record by then, but a free on the legacy stream is not
// ordered after kernels on the lanes' non-blocking streams; compute-sanitizer's
// memcheck reported it, session 31). One per channel, shared with its tables,
// which may outlive it: once the channel has synchronized its streams and
// destroys them, `lanes` is empty and a later free needs no order.
struct TableFreeOrder {
  std::mutex mu;
  std::vector<cudaStream_t> lanes;  // guarded by mu
  cudaStream_t stream = nullptr;    // where the frees run (non-blocking, the channel's)
  cudaEvent_t event = nullptr;      // recorded on each lane stream in turn, under mu
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
  std::shared_ptr<TableFreeOrder> free_order;  // the channel's (pooled tables)
  bool dst_on_device = false;  // every destination is memory of `device` (gpu::BlockFence::kDevice)
  std::vector<std::shared_ptr<RemotePiece>> pieces;  // distinct peer pieces the transfer touches
  Status error;                         // set when the build failed: every post ends with it
};

// Fills contig_end and max_len from host_segs.
void ComputeRuns(XferTable* t);

}  // namespace kvlane::core
