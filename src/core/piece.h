// Pieces: the unit of registration (a region is cut into pieces of bounded size)
// and the lookup of byte ranges in a sorted piece table.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kvlane/memory.h"
#include "kvlane/status.h"
#include "kvlane/transfer.h"

namespace kvlane::core {

struct Piece {
  uint64_t key = 0;     // random; names the piece on the wire
  uint64_t base = 0;    // virtual address in the owning process
  uint64_t len = 0;
  uint64_t region = 0;  // RegionId::value of the registration it belongs to
  MemoryKind kind = MemoryKind::kHost;
  int32_t device = 0;
  Access access = Access::kReadWrite;  // what peers may do to it (from RegisterMemory)
};

// A byte range inside exactly one piece.
struct PieceRange {
  uint64_t addr = 0;
  uint64_t len = 0;
  Piece piece;  // copy of the piece that holds it
};

// Splits [addr, addr+len) at piece boundaries of `sorted` (ordered by base,
// non-overlapping). Fails with InvalidArgument when any byte is not covered, the
// kind differs, or len is zero. Appends to `out`.
Status ResolveRange(const std::vector<Piece>& sorted, uint64_t addr, uint64_t len,
                    MemoryKind kind, std::vector<PieceRange>* out);

// NotAllowed when `op` is a WRITE (a peer storing into memory of `access`) and
// `access` is kReadOnly; Ok otherwise. `where` (what was refused) leads the message.
Status CheckAccess(Access access, Op op, const std::string& where);

// True when [addr, addr+len) lies inside the piece (overflow-safe).
inline bool Contains(const Piece& p, uint64_t addr, uint64_t len) {
  return addr >= p.base && len <= p.len && addr - p.base <= p.len - len;
}

}  // namespace kvlane::core
