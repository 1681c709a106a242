#include "pool_ops.h"

#include <vector>

#include "device_memory.h"

namespace kvbench {
namespace {

bool OnDevice(const PoolView& pool) { return pool.kind == kvlane::MemoryKind::kCuda; }

}  // namespace

kvlane::Status FillSources(const PoolView& pool, const PoolList& list,
                           const RequestIndices& indices, uint32_t rank, uint64_t epoch) {
  if (!OnDevice(pool)) {
    FillSources(pool.base, list, indices, rank, epoch);
    return kvlane::Status::Ok();
  }
  std::vector<uint8_t> stage;
  for (const auto& request : indices) {
    for (uint32_t i : request) {
      const Extent& e = list.extents[i];
      stage.resize(e.len);
      FillPattern(stage.data(), e.len, e.offset, rank, epoch);
      KVLANE_RETURN_IF_ERROR(CopyToDevice(pool.base + e.offset, stage.data(), e.len));
    }
  }
  return kvlane::Status::Ok();
}

kvlane::Status WipeDestinations(const PoolView& pool, const PoolList& list,
                                const RequestIndices& indices) {
  if (!OnDevice(pool)) {
    WipeDestinations(pool.base, list, indices);
    return kvlane::Status::Ok();
  }
  for (const auto& request : indices) {
    for (uint32_t i : request) {
      const Extent& e = list.extents[i];
      KVLANE_RETURN_IF_ERROR(DeviceMemset(pool.base + e.offset, kSentinelByte, e.len));
    }
  }
  return kvlane::Status::Ok();
}

kvlane::Result<VerifyResult> VerifyDestinations(const PoolView& pool, const PoolList& list,
                                                const RequestIndices& dst,
                                                const RequestIndices& src, uint32_t src_rank,
                                                uint64_t epoch) {
  if (!OnDevice(pool)) return VerifyDestinations(pool.base, list, dst, src, src_rank, epoch);
  VerifyResult total;
  std::vector<uint8_t> stage;
  for (size_t r = 0; r < dst.size(); ++r) {
    for (size_t k = 0; k < dst[r].size(); ++k) {
      const Extent& d = list.extents[dst[r][k]];
      const Extent& s = list.extents[src[r][k]];
      stage.resize(d.len);
      KVLANE_RETURN_IF_ERROR(CopyFromDevice(stage.data(), pool.base + d.offset, d.len));
      total.Merge(VerifyPattern(stage.data(), d.len, s.offset, src_rank, epoch), d.offset);
    }
  }
  return total;
}

kvlane::Status FlipOneLandedByte(const PoolView& pool, const PoolList& list,
                                 const RequestIndices& dst) {
  if (!OnDevice(pool)) {
    FlipOneLandedByte(pool.base, list, dst);
    return kvlane::Status::Ok();
  }
  if (dst.empty() || dst[0].empty()) return kvlane::Status::Ok();
  const Extent& e = list.extents[dst[0][0]];
  uint8_t byte = 0;
  KVLANE_RETURN_IF_ERROR(CopyFromDevice(&byte, pool.base + e.offset + e.len / 2, 1));
  byte ^= 0x01;
  return CopyToDevice(pool.base + e.offset + e.len / 2, &byte, 1);
}

}  // namespace kvbench
