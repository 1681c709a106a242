// PoolLayout: where each cache group lives inside the KV pool, and the pieces the
// pool is registered in. Plain values; thread-compatible.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kvlane/status.h"
#include "workload.h"

namespace kvbench {

// One group's span of the pool. The span is cut into pieces of piece_bytes (the
// last may be shorter); no descriptor crosses a piece boundary.
struct GroupLayout {
  std::string name;
  uint64_t offset = 0;  // from the pool base
  uint64_t bytes = 0;
  uint64_t piece_bytes = 0;  // a whole number of descriptors when desc_bytes is fixed
  uint64_t desc_bytes = 0;   // 0 when the descriptor size varies with the ISL (contig)

  // Descriptor slots of `desc` bytes that fit in this span.
  uint64_t Slots(uint64_t desc) const;
  // Pool offset of slot `slot` for descriptors of `desc` bytes.
  uint64_t SlotOffset(uint64_t desc, uint64_t slot) const;
};

struct Piece {
  uint64_t offset = 0;
  uint64_t bytes = 0;
};

struct PoolLayout {
  std::vector<GroupLayout> groups;
  std::vector<Piece> pieces;  // registration units, each at most the piece limit
  uint64_t bytes = 0;
};

// One burst shape the pool must hold: `batch` requests of `demand` (one entry per group).
struct BurstShape {
  uint64_t batch = 0;
  std::vector<GroupDemand> demand;
};

inline constexpr uint64_t kGroupAlign = 4096;

// Sizes each group for the largest burst among `shapes` (per group, the maximum
// over shapes). Fails when a descriptor is larger than `piece_limit`.
kvlane::Result<PoolLayout> BuildPoolLayout(const std::vector<Group>& groups,
                                           const std::vector<BurstShape>& shapes,
                                           uint64_t piece_limit);

}  // namespace kvbench
