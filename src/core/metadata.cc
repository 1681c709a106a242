#include "core/metadata.h"

#include <algorithm>
#include <string>

#include "core/bytes.h"
#include "core/plain_text.h"

namespace kvlane::core {
namespace {

constexpr uint32_t kMaxName = 255;
constexpr uint32_t kMaxText = 4096;
constexpr uint32_t kMaxCudaBlob = 64u << 20;
constexpr size_t kPieceBytes = 8 * 4 + 1 + 4 + 1;  // key base len region, kind, device, access

void PutPiece(ByteWriter& w, const Piece& p) {
  w.Put(p.key);
  w.Put(p.base);
  w.Put(p.len);
  w.Put(p.region);
  w.Put(static_cast<uint8_t>(p.kind));
  w.Put(p.device);
  w.Put(static_cast<uint8_t>(p.access));
}

Status CheckPiece(const Piece& p) {
  if (p.key == 0 || p.len == 0 || p.base + p.len < p.base)
    return Status::InvalidArgument("metadata: malformed piece");
  if (p.kind != MemoryKind::kHost && p.kind != MemoryKind::kCuda)
    return Status::InvalidArgument("metadata: unknown memory kind");
  if (p.access != Access::kReadWrite && p.access != Access::kReadOnly)
    return Status::InvalidArgument("metadata: unknown access " +
                                   std::to_string(static_cast<int>(p.access)) + " in a piece");
  return Status::Ok();
}

Status GetPieces(ByteReader& r, std::vector<Piece>* out) {
  uint32_t n = r.Get<uint32_t>();
  if (!r.ok() || n > kMaxMetaPieces || n > r.remaining() / kPieceBytes)
    return Status::InvalidArgument("metadata: bad piece count");
  out->resize(n);
  for (Piece& p : *out) {
    p.key = r.Get<uint64_t>();
    p.base = r.Get<uint64_t>();
    p.len = r.Get<uint64_t>();
    p.region = r.Get<uint64_t>();
    p.kind = static_cast<MemoryKind>(r.Get<uint8_t>());
    p.device = r.Get<int32_t>();
    p.access = static_cast<Access>(r.Get<uint8_t>());
    if (!r.ok()) return Status::InvalidArgument("metadata: truncated piece table");
    KVLANE_RETURN_IF_ERROR(CheckPiece(p));
  }
  for (size_t i = 1; i < out->size(); ++i) {
    const Piece& a = (*out)[i - 1];
    if (a.base + a.len > (*out)[i].base)
      return Status::InvalidArgument("metadata: pieces unsorted or overlapping");
  }
  // Keys name pieces on the wire and in lookups: each names exactly one.
  std::vector<uint64_t> keys(out->size());
  for (size_t i = 0; i < out->size(); ++i) keys[i] = (*out)[i].key;
  std::sort(keys.begin(), keys.end());
  if (std::adjacent_find(keys.begin(), keys.end()) != keys.end())
    return Status::InvalidArgument("metadata: two pieces share a key");
  return Status::Ok();
}

Status CheckVersion(uint16_t version) {
  if (version == kMetaVersion) return Status::Ok();
  const std::string both = "metadata: the blob is version " + std::to_string(version) +
                           ", this kvlane reads version " + std::to_string(kMetaVersion);
  if (version < kMetaVersion)
    return Status::InvalidArgument(both +
                                   " (the peer runs an older kvlane, without read-only "
                                   "regions): upgrade it");
  return Status::InvalidArgument(both + " (the peer runs a newer kvlane): upgrade this one");
}

}  // namespace

std::string EncodeMeta(const AgentMeta& m) {
  ByteWriter w;
  w.Put(kMetaMagic);
  w.Put(kMetaVersion);
  w.PutString(m.name);
  w.Put(m.agent_id);
  w.PutRaw(m.secret.data(), m.secret.size());
  w.Put(m.process_token);
  w.Put(m.pid);
  w.PutString(m.hostname);
  w.PutString(m.boot_id);
  w.PutString(m.tcp_host);
  w.Put(m.tcp_port);
  w.PutString(m.shm_socket);
  w.PutString(m.cuda_blob);
  w.Put(static_cast<uint32_t>(m.pieces.size()));
  for (const Piece& p : m.pieces) PutPiece(w, p);
  return std::move(w.str());
}

Result<AgentMeta> DecodeMeta(std::string_view blob) {
  ByteReader r(blob);
  if (r.Get<uint32_t>() != kMetaMagic) return Status::InvalidArgument("metadata: bad magic (not a kvlane blob)");
  KVLANE_RETURN_IF_ERROR(CheckVersion(r.Get<uint16_t>()));
  AgentMeta m;
  m.name = r.GetString(kMaxName);
  m.agent_id = r.Get<uint64_t>();
  r.GetRaw(m.secret.data(), m.secret.size());
  m.process_token = r.Get<uint64_t>();
  m.pid = r.Get<uint32_t>();
  m.hostname = r.GetString(kMaxText);
  m.boot_id = r.GetString(kMaxText);
  m.tcp_host = r.GetString(kMaxText);
  m.tcp_port = r.Get<uint16_t>();
  m.shm_socket = r.GetString(kMaxText);
  m.cuda_blob = r.GetString(kMaxCudaBlob);
  if (!r.ok()) return Status::InvalidArgument("metadata: truncated header");
  if (m.name.empty() || m.agent_id == 0) return Status::InvalidArgument("metadata: missing name or id");
  KVLANE_RETURN_IF_ERROR(CheckAgentName(m.name, "metadata"));
  // Text a peer's blob carries that ends up in messages (and, tcp_host, in a
  // resolver call): plain, as names are.
  if (!IsPlainText(m.hostname) || !IsPlainText(m.boot_id) || !IsPlainText(m.tcp_host))
    return Status::InvalidArgument("metadata: host name, boot id or tcp host is not plain text");
  KVLANE_RETURN_IF_ERROR(GetPieces(r, &m.pieces));
  if (r.remaining() != 0) return Status::InvalidArgument("metadata: trailing bytes");
  return m;
}

}  // namespace kvlane::core
