#include "transport/cuda/cuda_blob.h"

#include "core/bytes.h"

namespace kvlane::core {
namespace {

constexpr uint32_t kBlobMagic = 0x43564c4b;  // "KLVC"
constexpr uint16_t kBlobVersion = 1;
constexpr uint32_t kEntryBytes = 8 + 4 + 8 * 4 + sizeof(cudaIpcMemHandle_t);

bool Inside(const CudaExport& e) {
  return e.piece_len > 0 && e.alloc_len > 0 && e.alloc_base + e.alloc_len > e.alloc_base &&
         e.piece_base >= e.alloc_base && e.piece_len <= e.alloc_len &&
         e.piece_base - e.alloc_base <= e.alloc_len - e.piece_len;
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
    w.PutRaw(&e.handle, sizeof(e.handle));
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
  if (!r.ok() || b.devices > 4096 || n > r.remaining() / kEntryBytes)
    return Status::InvalidArgument("cuda metadata: truncated header or bad counts");
  b.exports.resize(n);
  for (CudaExport& e : b.exports) {
    e.key = r.Get<uint64_t>();
    e.device = r.Get<int32_t>();
    e.piece_base = r.Get<uint64_t>();
    e.piece_len = r.Get<uint64_t>();
    e.alloc_base = r.Get<uint64_t>();
    e.alloc_len = r.Get<uint64_t>();
    r.GetRaw(&e.handle, sizeof(e.handle));
    if (!r.ok() || e.key == 0 || e.device < 0 || !Inside(e))
      return Status::InvalidArgument("cuda metadata: malformed export entry");
  }
  if (r.remaining() != 0) return Status::InvalidArgument("cuda metadata: trailing bytes");
  return b;
}

}  // namespace kvlane::core
