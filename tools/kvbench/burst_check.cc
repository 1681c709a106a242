#include "burst_check.h"

namespace kvbench {

void FillSources(uint8_t* pool, const PoolList& list, const RequestIndices& indices, uint32_t rank,
                 uint64_t epoch, const StopCheck& stop) {
  StopPacer pacer(stop);
  for (const auto& request : indices) {
    for (uint32_t i : request) {
      const Extent& e = list.extents[i];
      FillPattern(pool + e.offset, e.len, e.offset, rank, epoch);
      if (pacer.Done(e.len)) return;
    }
  }
}

void WipeDestinations(uint8_t* pool, const PoolList& list, const RequestIndices& indices,
                      const StopCheck& stop) {
  StopPacer pacer(stop);
  for (const auto& request : indices) {
    for (uint32_t i : request) {
      WipeSentinel(pool + list.extents[i].offset, list.extents[i].len);
      if (pacer.Done(list.extents[i].len)) return;
    }
  }
}

VerifyResult VerifyDestinations(const uint8_t* pool, const PoolList& list,
                                const RequestIndices& dst, const RequestIndices& src,
                                uint32_t src_rank, uint64_t epoch, const StopCheck& stop) {
  StopPacer pacer(stop);
  VerifyResult total;
  for (size_t r = 0; r < dst.size(); ++r) {
    for (size_t k = 0; k < dst[r].size(); ++k) {
      const Extent& d = list.extents[dst[r][k]];
      const Extent& s = list.extents[src[r][k]];
      total.Merge(VerifyPattern(pool + d.offset, d.len, s.offset, src_rank, epoch), d.offset);
      if (pacer.Done(d.len)) return total;
    }
  }
  return total;
}

void FlipOneLandedByte(uint8_t* pool, const PoolList& list, const RequestIndices& dst) {
  if (dst.empty() || dst[0].empty()) return;
  const Extent& e = list.extents[dst[0][0]];
  pool[e.offset + e.len / 2] ^= 0x01;
}

}  // namespace kvbench
