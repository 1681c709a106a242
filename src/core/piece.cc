#include "core/piece.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "core/hex.h"

namespace kvlane::core {
namespace {

// The piece containing `addr`, or nullptr.
const Piece* FindContaining(const std::vector<Piece>& sorted, uint64_t addr) {
  auto it = std::upper_bound(sorted.begin(), sorted.end(), addr,
                             [](uint64_t a, const Piece& p) { return a < p.base; });
  if (it == sorted.begin()) return nullptr;
  --it;
  return addr - it->base < it->len ? &*it : nullptr;
}

}  // namespace

std::string Hex(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

Status ResolveRange(const std::vector<Piece>& sorted, uint64_t addr, uint64_t len,
                    MemoryKind kind, std::vector<PieceRange>* out) {
  if (len == 0) return Status::InvalidArgument("descriptor at " + Hex(addr) + " has zero length");
  if (addr + len < addr) return Status::InvalidArgument("descriptor wraps the address space");
  uint64_t cur = addr, left = len;
  while (left > 0) {
    const Piece* p = FindContaining(sorted, cur);
    if (p == nullptr)
      return Status::InvalidArgument("descriptor [" + Hex(addr) + ", +" + std::to_string(len) +
                                     ") is not inside registered memory (gap at " + Hex(cur) + ")");
    if (p->kind != kind)
      return Status::InvalidArgument("descriptor at " + Hex(addr) + " is " +
                                     MemoryKindName(p->kind) + " memory, list says " +
                                     MemoryKindName(kind));
    uint64_t take = std::min(left, p->base + p->len - cur);
    out->push_back({cur, take, *p});
    cur += take;
    left -= take;
  }
  return Status::Ok();
}

Status CheckAccess(Access access, Op op, const std::string& where) {
  if (op != Op::kWrite || access != Access::kReadOnly) return Status::Ok();
  return Status::NotAllowed(where + ": the region is read-only (Access::kReadOnly): " +
                            "peers may READ it, not WRITE it");
}

}  // namespace kvlane::core
