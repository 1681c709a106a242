// Building a request's segments: a descriptor pair's range is appended, or
// merged into the segment before it (AgentOptions::merge_adjacent).
#pragma once

#include <cstdint>

#include "core/piece.h"
#include "core/request.h"

namespace kvlane::core {

// Appends `s` (inside local piece lp and remote piece rp) to r->segs, or grows
// the last segment by it when `merge` and s continues that segment on both
// sides inside the same pieces (one piece is one mapping on either side, so
// the joined range is contiguous wherever it is copied), keeping every segment
// at most max_seg bytes (a remainder becomes a segment of its own). The joined
// range is checked against lp and rp themselves, not only against the keys: a
// peer's keys are its word. REQUIRES: s lies inside lp and rp; s.len <= max_seg.
void AppendSegment(Request* r, const Segment& s, const Piece& lp, const Piece& rp, uint64_t max_seg,
                   bool merge);

}  // namespace kvlane::core
