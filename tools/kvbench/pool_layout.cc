#include "pool_layout.h"

#include <algorithm>
#include <string>

namespace kvbench {
namespace {

// Bytes a group span needs to hold `descs` descriptors of `desc` bytes when no
// descriptor may cross a piece of `piece` bytes.
uint64_t SpanBytes(uint64_t piece, uint64_t desc, uint64_t descs) {
  uint64_t per_piece = piece / desc;
  return descs / per_piece * piece + descs % per_piece * desc;
}

// The fixed descriptor size of group `g` across shapes, or 0 when it varies.
uint64_t FixedDescBytes(const std::vector<BurstShape>& shapes, size_t g) {
  uint64_t fixed = 0;
  for (const BurstShape& s : shapes) {
    uint64_t d = s.demand[g].desc_bytes;
    if (fixed != 0 && d != fixed) return 0;
    fixed = d;
  }
  return fixed;
}

kvlane::Result<GroupLayout> LayOutGroup(const Group& group, const std::vector<BurstShape>& shapes,
                                        size_t g, uint64_t piece_limit) {
  GroupLayout gl;
  gl.name = group.name;
  gl.desc_bytes = FixedDescBytes(shapes, g);
  gl.piece_bytes = gl.desc_bytes ? piece_limit / gl.desc_bytes * gl.desc_bytes : piece_limit;
  for (const BurstShape& s : shapes) {
    const GroupDemand& d = s.demand[g];
    if (d.descs == 0) continue;
    if (d.desc_bytes > piece_limit) {
      return kvlane::Status::InvalidArgument(
          "group " + group.name + ": descriptor of " + std::to_string(d.desc_bytes) +
          " B exceeds the registration piece limit of " + std::to_string(piece_limit) + " B");
    }
    gl.bytes = std::max(gl.bytes, SpanBytes(gl.piece_bytes, d.desc_bytes, s.batch * d.descs));
  }
  return gl;
}

void CutPieces(const GroupLayout& gl, std::vector<Piece>* pieces) {
  for (uint64_t at = 0; at < gl.bytes; at += gl.piece_bytes) {
    pieces->push_back({gl.offset + at, std::min(gl.piece_bytes, gl.bytes - at)});
  }
}

}  // namespace

uint64_t GroupLayout::Slots(uint64_t desc) const {
  uint64_t per_piece = piece_bytes / desc;
  return bytes / piece_bytes * per_piece + bytes % piece_bytes / desc;
}

uint64_t GroupLayout::SlotOffset(uint64_t desc, uint64_t slot) const {
  uint64_t per_piece = piece_bytes / desc;
  return offset + slot / per_piece * piece_bytes + slot % per_piece * desc;
}

kvlane::Result<PoolLayout> BuildPoolLayout(const std::vector<Group>& groups,
                                           const std::vector<BurstShape>& shapes,
                                           uint64_t piece_limit) {
  PoolLayout layout;
  for (size_t g = 0; g < groups.size(); ++g) {
    KVLANE_ASSIGN_OR_RETURN(GroupLayout gl, LayOutGroup(groups[g], shapes, g, piece_limit));
    gl.offset = layout.bytes;
    layout.bytes = RoundUp(layout.bytes + gl.bytes, kGroupAlign);
    CutPieces(gl, &layout.pieces);
    layout.groups.push_back(std::move(gl));
  }
  return layout;
}

}  // namespace kvbench
