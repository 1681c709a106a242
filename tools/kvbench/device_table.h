// The table the pattern kernels (gpu/) run over: the extents of a descriptor
// list as device addresses, cut into pieces of at most kTablePieceBytes so that
// one block takes one piece, and the kernels' result read back as a
// VerifyResult. Pure functions (no CUDA calls); thread-compatible.
#pragma once

#include <cstdint>
#include <vector>

#include "burst_check.h"
#include "gpu/pattern_types.h"

namespace kvbench {

inline constexpr uint64_t kTablePieceBytes = 256 << 10;

using PatternTable = std::vector<gpu::PatternExtent>;

// The extents `indices` names in the pool at `base`, in request and pair order.
// Each carries the pattern of its paired extent in `src` ([request][pair], same
// shape), or its own offset's pattern when src is null (a source being filled).
PatternTable MakePatternTable(uint8_t* base, const PoolList& list, const RequestIndices& indices,
                              const RequestIndices* src);

// The verify kernel's totals as a VerifyResult: checked = the table's bytes,
// first_mismatch = the pool offset (from `base`) of the first differing byte.
VerifyResult ToVerifyResult(const gpu::VerifyTotals& totals, const PatternTable& table,
                            const uint8_t* base);

}  // namespace kvbench
