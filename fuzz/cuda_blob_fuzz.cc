// libFuzzer target: core::DecodeCudaBlob on untrusted cuda metadata (the
// AgentMeta::cuda_blob a peer sends). A blob that decodes must hold what the
// importer relies on (every piece inside its memory, VMM allocations back to
// back over exactly that memory, known kinds and handle types) and survive an
// encode/decode round trip unchanged.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "transport/cuda/cuda_blob.h"

namespace {

using kvlane::core::CudaExport;
using kvlane::core::ExportKind;

bool Holds(const CudaExport& e) {
  if (e.key == 0 || e.piece_len == 0 || e.alloc_len == 0) return false;
  if (e.alloc_base + e.alloc_len < e.alloc_base) return false;  // wraps
  if (e.piece_base < e.alloc_base || e.piece_base + e.piece_len < e.piece_base ||
      e.piece_base + e.piece_len > e.alloc_base + e.alloc_len)
    return false;
  switch (e.kind) {
    case ExportKind::kLegacyIpc:
    case ExportKind::kNone:
      return e.allocs.empty();
    case ExportKind::kVmm: {
      uint64_t at = e.alloc_base;
      for (const auto& a : e.allocs) {
        if (a.base != at || a.len == 0 || a.handles == 0 ||
            (a.handles & ~(kvlane::core::kVmmPosixFd | kvlane::core::kVmmFabric)) != 0)
          return false;
        at += a.len;
      }
      return !e.allocs.empty() && at == e.alloc_base + e.alloc_len;
    }
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvlane::core;
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  auto b = DecodeCudaBlob(in);
  if (!b.ok()) return 0;
  for (const CudaExport& e : b->exports)
    if (!Holds(e)) __builtin_trap();  // the decoder let a bad entry through
  if (EncodeCudaBlob(b.value()) != in) __builtin_trap();
  return 0;
}
