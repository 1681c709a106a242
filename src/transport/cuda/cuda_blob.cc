#include "transport/cuda/cuda_blob.h"

#include <algorithm>

#include "core/bytes.h"

namespace kvlane::core {
namespace {

constexpr uint32_t kBlobMagic = 0x43564c4b;  // "KLVC"
constexpr uint16_t kBlobVersion = 2;         // 2: export kinds (legacy IPC, VMM, none)
constexpr uint32_t kEntryMinBytes = 8 + 4 + 8 * 4 + 1 + 4;  // header + the smallest body
constexpr uint32_t kVmmAllocMinBytes = 8 + 8 + 1;

bool Inside(const CudaExport& e) {
  return e.piece_len > 0 && e.alloc_len > 0 && e.alloc_base + e.alloc_len > e.alloc_base &&
         e.piece_base >= e.alloc_base && e.piece_len <= e.alloc_len &&
         e.piece_base - e.alloc_base <= e.alloc_len - e.piece_len;
}

// The allocations start at alloc_base, follow each other without gaps and end
// exactly at alloc_base + alloc_len (no overflow: Inside() checked the sum).
bool BackToBack(const CudaExport& e) {
  uint64_t at = e.alloc_base, left = e.alloc_len;
  for (const CudaVmmAlloc& a : e.allocs) {
    if (a.base != at || a.len == 0 || a.len > left) return false;
    if (a.handles == 0 || (a.handles & ~(kVmmPosixFd | kVmmFabric)) != 0) return false;
    at += a.len;
    left -= a.len;
  }
  return left == 0 && !e.allocs.empty();
}

void PutBody(ByteWriter& w, const CudaExport& e) {
  w.Put(static_cast<uint8_t>(e.kind));
  if (e.kind == ExportKind::kLegacyIpc) w.PutRaw(e.handle.data(), e.handle.size());
  if (e.kind == ExportKind::kNone) w.PutString(e.reason.substr(0, kMaxReasonBytes));
  if (e.kind != ExportKind::kVmm) return;
  w.Put(static_cast<uint32_t>(e.allocs.size()));
  for (const CudaVmmAlloc& a : e.allocs) {
    w.Put(a.base);
    w.Put(a.len);
    w.Put(a.handles);
    if (a.handles & kVmmFabric) w.PutRaw(a.fabric.data(), a.fabric.size());
  }
}

bool GetBody(ByteReader& r, CudaExport* e) {
  uint8_t kind = r.Get<uint8_t>();
  e->kind = static_cast<ExportKind>(kind);
  if (e->kind == ExportKind::kLegacyIpc) return r.GetRaw(e->handle.data(), e->handle.size());
  if (e->kind == ExportKind::kNone) {
    e->reason = r.GetString(kMaxReasonBytes);
    return r.ok();
  }
  if (e->kind != ExportKind::kVmm) return false;
  uint32_t n = r.Get<uint32_t>();
  if (!r.ok() || n == 0 || n > kMaxVmmAllocs || n > r.remaining() / kVmmAllocMinBytes) return false;
  e->allocs.reserve(std::min<uint32_t>(n, 64));  // then only as entries decode
  for (uint32_t i = 0; i < n && r.ok(); ++i) {
    CudaVmmAlloc& a = e->allocs.emplace_back();
    a.base = r.Get<uint64_t>();
    a.len = r.Get<uint64_t>();
    a.handles = r.Get<uint8_t>();
    if (a.handles & kVmmFabric) r.GetRaw(a.fabric.data(), a.fabric.size());
  }
  return r.ok() && BackToBack(*e);
}

}  // namespace

std::string EncodeCudaBlob(const CudaBlob& b) {
  ByteWriter w;
  w.Put(kBlobMagic);
  w.Put(kBlobVersion);
  w.PutString(b.socket);
  w.Put(b.devices);
  w.Put(static_cast<uint32_t>(b.exports.size()));
  for (const CudaExport& e : b.exports) {
    w.Put(e.key);
    w.Put(e.device);
    w.Put(e.piece_base);
    w.Put(e.piece_len);
    w.Put(e.alloc_base);
    w.Put(e.alloc_len);
    PutBody(w, e);
  }
  return std::move(w.str());
}

Result<CudaBlob> DecodeCudaBlob(std::string_view bytes) {
  ByteReader r(bytes);
  if (r.Get<uint32_t>() != kBlobMagic || r.Get<uint16_t>() != kBlobVersion)
    return Status::InvalidArgument("cuda metadata: bad magic or version");
  CudaBlob b;
  b.socket = r.GetString(107);
  b.devices = r.Get<uint32_t>();
  uint32_t n = r.Get<uint32_t>();
  if (!r.ok() || b.devices > 4096 || n > kMaxExports || n > r.remaining() / kEntryMinBytes)
    return Status::InvalidArgument("cuda metadata: truncated header or bad counts");
  // Grown as entries decode, not sized by the claimed count: a blob of garbage
  // costs about what it weighs (an entry in memory is ~3.6 times its wire size).
  b.exports.reserve(std::min<uint32_t>(n, 4096));
  uint64_t allocs = 0;
  for (uint32_t i = 0; i < n; ++i) {
    CudaExport& e = b.exports.emplace_back();
    e.key = r.Get<uint64_t>();
    e.device = r.Get<int32_t>();
    e.piece_base = r.Get<uint64_t>();
    e.piece_len = r.Get<uint64_t>();
    e.alloc_base = r.Get<uint64_t>();
    e.alloc_len = r.Get<uint64_t>();
    if (!r.ok() || e.key == 0 || e.device < 0 || !Inside(e) || !GetBody(r, &e))
      return Status::InvalidArgument("cuda metadata: malformed export entry");
    if ((allocs += e.allocs.size()) > kMaxBlobVmmAllocs)
      return Status::InvalidArgument("cuda metadata: too many VMM allocations");
  }
  if (r.remaining() != 0) return Status::InvalidArgument("cuda metadata: trailing bytes");
  return b;
}

}  // namespace kvlane::core
