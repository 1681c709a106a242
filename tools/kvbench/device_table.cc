#include "device_table.h"

namespace kvbench {

PatternTable MakePatternTable(uint8_t* base, const PoolList& list, const RequestIndices& indices,
                              const RequestIndices* src) {
  PatternTable table;
  for (size_t r = 0; r < indices.size(); ++r) {
    for (size_t k = 0; k < indices[r].size(); ++k) {
      const Extent& e = list.extents[indices[r][k]];
      uint64_t from = src ? list.extents[(*src)[r][k]].offset : e.offset;
      for (uint64_t at = 0; at < e.len; at += kTablePieceBytes) {
        uint64_t len = e.len - at < kTablePieceBytes ? e.len - at : kTablePieceBytes;
        table.push_back({base + e.offset + at, len, from + at});
      }
    }
  }
  return table;
}

VerifyResult ToVerifyResult(const gpu::VerifyTotals& totals, const PatternTable& table,
                            const uint8_t* base) {
  VerifyResult v;
  for (const gpu::PatternExtent& e : table) v.checked += e.len;
  v.mismatches = totals.mismatches;
  if (totals.first == gpu::kNoMismatch) return v;
  uint64_t entry = totals.first >> gpu::kEntryShift;
  uint64_t byte = totals.first & (gpu::kMaxEntryBytes - 1);
  if (entry < table.size()) v.first_mismatch = table[entry].ptr - base + byte;
  return v;
}

}  // namespace kvbench
