#include "core/registry.h"

#include <algorithm>
#include <string>

#include "core/metadata.h"
#include "core/random.h"

namespace kvlane::core {

Result<RegionId> Registry::Add(uint64_t addr, uint64_t len, MemoryKind kind, int32_t device,
                               Access access) {
  if (addr == 0 || len == 0) return Status::InvalidArgument("RegisterMemory: null address or zero length");
  if (access != Access::kReadWrite && access != Access::kReadOnly)
    return Status::InvalidArgument("RegisterMemory: unknown access " +
                                   std::to_string(static_cast<int>(access)));
  if (addr + len < addr) return Status::InvalidArgument("RegisterMemory: range wraps");
  // Every piece travels in the metadata, which carries at most kMaxMetaPieces:
  // past that, peers would refuse the blob (and a wild length would allocate
  // pieces without end here).
  const uint64_t pieces = (len - 1) / piece_bytes_ + 1;
  std::unique_lock lock(mu_);
  if (pieces > kMaxMetaPieces - sorted_.size())
    return Status::InvalidArgument(
        "RegisterMemory: " + std::to_string(pieces) + " pieces of AgentOptions.piece_bytes (" +
        std::to_string(piece_bytes_) + ") would pass the " + std::to_string(kMaxMetaPieces) +
        " pieces metadata carries (" + std::to_string(sorted_.size()) +
        " registered); raise piece_bytes or register less");
  for (const Piece& p : sorted_) {
    if (addr < p.base + p.len && p.base < addr + len)
      return Status::InvalidArgument("RegisterMemory: range overlaps region " +
                                     std::to_string(p.region) + "; deregister it first");
  }
  RegionId id{next_region_++};
  // Counted, not `off < len; off += piece_bytes_`: with a piece_bytes_ near
  // 2^64 / pieces, the offset past the last piece wrapped below len and the loop
  // never ended. k * piece_bytes_ <= (len - 1) / piece_bytes_ * piece_bytes_ < len.
  for (uint64_t k = 0; k < pieces; ++k) {
    const uint64_t off = k * piece_bytes_;
    uint64_t key = RandomU64();
    while (key == 0 || by_key_.count(key) != 0) key = RandomU64();  // a key names one piece
    Piece p{key, addr + off, std::min(piece_bytes_, len - off), id.value, kind, device, access};
    by_key_[p.key] = p;
    sorted_.push_back(p);
  }
  std::sort(sorted_.begin(), sorted_.end(), [](const Piece& a, const Piece& b) { return a.base < b.base; });
  changes_.fetch_add(1, std::memory_order_release);
  return id;
}

Result<std::vector<uint64_t>> Registry::Remove(RegionId id) {
  std::vector<Piece> removed;
  {
    std::unique_lock lock(mu_);  // waits for remote accesses in flight
    auto dead = [&](const Piece& p) { return p.region == id.value; };
    for (const Piece& p : sorted_)
      if (dead(p)) removed.push_back(p);
    if (removed.empty()) return Status::NotFound("DeregisterMemory: unknown region " + std::to_string(id.value));
    std::erase_if(sorted_, dead);
    std::erase_if(by_key_, [&](const auto& kv) { return dead(kv.second); });
    removals_.fetch_add(1, std::memory_order_seq_cst);
    changes_.fetch_add(1, std::memory_order_release);
  }
  {
    std::lock_guard hook_lock(hook_mu_);
    if (remove_hook_) remove_hook_(removed);
  }
  std::vector<uint64_t> keys;
  keys.reserve(removed.size());
  for (const Piece& p : removed) keys.push_back(p.key);
  return keys;
}

void Registry::SetRemoveHook(RemoveHook hook) {
  std::lock_guard lock(hook_mu_);
  remove_hook_ = std::move(hook);
}

std::vector<Piece> Registry::Pieces() const {
  std::shared_lock lock(mu_);
  return sorted_;
}

Status Registry::ResolveLocal(uint64_t addr, uint64_t len, MemoryKind kind,
                              std::vector<PieceRange>* out) const {
  std::shared_lock lock(mu_);
  return ResolveRange(sorted_, addr, len, kind, out);
}

Status Registry::LookupLocked(uint64_t key, uint64_t addr, uint64_t len, Op op, uint8_t** ptr,
                              MemoryKind* kind) const {
  if (closed_) return Status::RemoteDisconnect("peer agent is shutting down");
  auto it = by_key_.find(key);
  if (it == by_key_.end()) return Status::RemoteStale("region key is not registered (deregistered?)");
  if (len == 0 || !Contains(it->second, addr, len))
    return Status::NotAllowed("access outside the registered piece");
  KVLANE_RETURN_IF_ERROR(CheckAccess(it->second.access, op, "WRITE into a piece"));
  *ptr = reinterpret_cast<uint8_t*>(addr);
  if (kind != nullptr) *kind = it->second.kind;
  return Status::Ok();
}

bool Registry::HasKey(uint64_t key) const { return HasKeys({&key, 1}); }

std::vector<bool> Registry::Live(std::span<const uint64_t> keys) const {
  std::vector<bool> live(keys.size(), false);
  std::shared_lock lock(mu_);
  if (closed_) return live;
  for (size_t i = 0; i < keys.size(); ++i) live[i] = by_key_.contains(keys[i]);
  return live;
}

bool Registry::HasKeys(std::span<const uint64_t> keys) const {
  std::shared_lock lock(mu_);
  if (closed_) return false;
  for (uint64_t key : keys)
    if (!by_key_.contains(key)) return false;
  return true;
}

void Registry::Close() {
  std::unique_lock lock(mu_);
  closed_ = true;
}

}  // namespace kvlane::core
