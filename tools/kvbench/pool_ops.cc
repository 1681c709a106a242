#include "pool_ops.h"

#include "device_check.h"
#include "device_memory.h"

namespace kvbench {
namespace {

bool OnDevice(const PoolView& pool) { return pool.kind == kvlane::MemoryKind::kCuda; }

kvlane::Status Stopped() { return kvlane::Status::Canceled("stopped partway"); }

// `stop`, remembering in *fired whether it answered true.
StopCheck Recording(const StopCheck& stop, bool* fired) {
  if (!stop) return {};
  return [&stop, fired] { return *fired = stop(); };
}

}  // namespace

kvlane::Status FillSources(const PoolView& pool, const PoolList& list,
                           const RequestIndices& indices, uint32_t rank, uint64_t epoch,
                           const StopCheck& stop) {
  bool fired = false;
  if (!OnDevice(pool)) {
    FillSources(pool.base, list, indices, rank, epoch, Recording(stop, &fired));
    return fired ? Stopped() : kvlane::Status::Ok();
  }
  if (stop && stop()) return Stopped();
  return DeviceFill(pool.device, MakePatternTable(pool.base, list, indices, nullptr), rank, epoch);
}

kvlane::Status WipeDestinations(const PoolView& pool, const PoolList& list,
                                const RequestIndices& indices, const StopCheck& stop) {
  bool fired = false;
  if (!OnDevice(pool)) {
    WipeDestinations(pool.base, list, indices, Recording(stop, &fired));
    return fired ? Stopped() : kvlane::Status::Ok();
  }
  if (stop && stop()) return Stopped();
  return DeviceWipe(pool.device, MakePatternTable(pool.base, list, indices, nullptr),
                    kSentinelByte);
}

kvlane::Result<VerifyResult> VerifyDestinations(const PoolView& pool, const PoolList& list,
                                                const RequestIndices& dst,
                                                const RequestIndices& src, uint32_t src_rank,
                                                uint64_t epoch, const StopCheck& stop) {
  bool fired = false;
  if (!OnDevice(pool)) {
    VerifyResult v =
        VerifyDestinations(pool.base, list, dst, src, src_rank, epoch, Recording(stop, &fired));
    if (fired) return Stopped();
    return v;
  }
  if (stop && stop()) return Stopped();
  PatternTable table = MakePatternTable(pool.base, list, dst, &src);
  KVLANE_ASSIGN_OR_RETURN(gpu::VerifyTotals totals,
                          DeviceVerify(pool.device, table, src_rank, epoch));
  return ToVerifyResult(totals, table, pool.base);
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
