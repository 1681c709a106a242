// The cuda section of an agent's metadata (AgentMeta::cuda_blob): where its
// control socket listens and, per exported device piece, how another process
// reaches it: a legacy CUDA IPC handle, or the VMM allocations under it
// (cuMemCreate + cuMemMap) with the shareable handle types each offers, or why
// it cannot be exported. Decoding treats the blob as untrusted input. No CUDA
// here: the decoder is built (and fuzzed, fuzz/cuda_blob_fuzz.cc) without it.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kvlane/status.h"

namespace kvlane::core {

enum class ExportKind : uint8_t {
  kLegacyIpc = 1,  // cudaIpcGetMemHandle of the allocation (cudaMalloc memory)
  kVmm = 2,        // VMM allocations, see CudaExport::allocs
  kNone = 3,       // not reachable from another process; CudaExport::reason says why
};

// Shareable handle types of one VMM allocation (bits).
inline constexpr uint8_t kVmmPosixFd =
    1;  // the importer asks the exporter's control socket for an fd
inline constexpr uint8_t kVmmFabric = 2;             // CudaVmmAlloc::fabric is the handle
inline constexpr uint32_t kMaxVmmAllocs = 1u << 16;  // per piece
// Per blob: the exports (one per piece at most, so the metadata's own cap) and
// the VMM allocations of all of them, which bound what decoding allocates.
inline constexpr uint32_t kMaxExports = 1u << 20;
inline constexpr uint32_t kMaxBlobVmmAllocs = 1u << 20;
inline constexpr uint32_t kMaxReasonBytes = 512;

// One VMM allocation, mapped at [base, base + len) in the exporter (one cuMemMap).
struct CudaVmmAlloc {
  uint64_t base = 0;
  uint64_t len = 0;
  uint8_t handles = 0;               // kVmmPosixFd | kVmmFabric, never 0
  std::array<uint8_t, 64> fabric{};  // CUmemFabricHandle when kVmmFabric
};

// One registered kCuda piece and the memory that holds it.
struct CudaExport {
  uint64_t key = 0;         // the piece's key (Piece::key)
  int32_t device = 0;       // CUDA ordinal in the exporting process
  uint64_t piece_base = 0;  // exporter's virtual address of the piece
  uint64_t piece_len = 0;
  uint64_t alloc_base = 0;  // exporter's virtual address of the memory to map (legacy: the
  uint64_t alloc_len = 0;   // allocation; VMM: the allocations back to back), holds the piece
  ExportKind kind = ExportKind::kLegacyIpc;
  // kLegacyIpc: the cudaIpcMemHandle_t of the allocation (alloc_base), its bytes.
  std::array<uint8_t, 64> handle{};
  std::vector<CudaVmmAlloc> allocs;  // kVmm: from alloc_base, contiguous, covering alloc_len
  std::string reason;                // kNone
};

struct CudaBlob {
  std::string socket;    // abstract unix socket of the control server
  uint32_t devices = 0;  // visible CUDA devices of the exporter
  std::vector<CudaExport> exports;
};

std::string EncodeCudaBlob(const CudaBlob& blob);
// InvalidArgument on anything malformed: truncation, counts, unknown kinds or
// handle types, a piece outside its memory, VMM allocations that are not back to
// back or do not cover it exactly, trailing bytes.
Result<CudaBlob> DecodeCudaBlob(std::string_view bytes);

}  // namespace kvlane::core
