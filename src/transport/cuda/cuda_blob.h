// The cuda section of an agent's metadata (AgentMeta::cuda_blob): where its
// control socket listens and one legacy CUDA IPC handle per exported device
// piece. Decoding treats the blob as untrusted input.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kvlane/status.h"

namespace kvlane::core {

// One registered kCuda piece and the allocation that holds it.
struct CudaExport {
  uint64_t key = 0;          // the piece's key (Piece::key)
  int32_t device = 0;        // CUDA ordinal in the exporting process
  uint64_t piece_base = 0;   // exporter's virtual address of the piece
  uint64_t piece_len = 0;
  uint64_t alloc_base = 0;   // exporter's virtual address of the whole allocation
  uint64_t alloc_len = 0;
  cudaIpcMemHandle_t handle{};  // names the allocation (alloc_base) to other processes
};

struct CudaBlob {
  std::string socket;        // abstract unix socket of the control server
  uint32_t devices = 0;      // visible CUDA devices of the exporter
  std::vector<CudaExport> exports;
};

std::string EncodeCudaBlob(const CudaBlob& blob);
// InvalidArgument on anything malformed: truncation, counts, a piece outside its
// allocation, trailing bytes.
Result<CudaBlob> DecodeCudaBlob(std::string_view bytes);

}  // namespace kvlane::core
