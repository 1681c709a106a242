#include "reference.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>

#include "device_memory.h"
#include "stats.h"

namespace kvbench {
namespace {

using Clock = std::chrono::steady_clock;
using RequestIndices = std::vector<std::vector<uint32_t>>;

double MsSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

bool Pushes(kvlane::Op op) { return op == kvlane::Op::kWrite; }

// The sides a pair's bytes leave from and land on.
const RequestIndices& From(const BurstMap& map, kvlane::Op op) {
  return Pushes(op) ? map.initiator : map.target;
}
const RequestIndices& To(const BurstMap& map, kvlane::Op op) {
  return Pushes(op) ? map.target : map.initiator;
}

// Runs copy(dst, src, len) over every pair; false as soon as one fails.
template <typename Copy>
bool CopyPairs(const PoolList& list, const BurstMap& map, kvlane::Op op, Copy copy) {
  const RequestIndices &from = From(map, op), &to = To(map, op);
  for (size_t r = 0; r < from.size(); ++r) {
    for (size_t k = 0; k < from[r].size(); ++k) {
      const Extent& src = list.extents[from[r][k]];
      const Extent& dst = list.extents[to[r][k]];
      if (!copy(dst.offset, src.offset, src.len)) return false;
    }
  }
  return true;
}

ReferenceFigures Figures(const char* method, const std::vector<double>& ms, uint64_t bytes) {
  double p50 = Percentile(ms, 0.5);
  return {method, p50, GigabytesPerSecond(bytes, p50)};
}

// A device pool's socket reference stages each extent through one pinned host
// buffer, this many bytes at a time.
constexpr uint64_t kStageBytes = 4ull << 20;

using Pinned = std::unique_ptr<void, void (*)(void*)>;

// The pinned staging buffer for a device pool; none (null) for a host pool.
kvlane::Result<Pinned> StageFor(const PoolView& pool) {
  if (pool.kind != kvlane::MemoryKind::kCuda) return Pinned(nullptr, PinnedFree);
  KVLANE_ASSIGN_OR_RETURN(void* p, PinnedAlloc(kStageBytes));
  return Pinned(p, PinnedFree);
}

// Sends (cudaMemcpy to `stage`, then send) or receives (receive into `stage`, then
// cudaMemcpy) `len` device bytes at `at`, one chunk after the other: no overlap.
kvlane::Status StreamStaged(ControlChannel* control, uint8_t* at, uint64_t len, void* stage,
                            bool send) {
  for (uint64_t done = 0; done < len; done += kStageBytes) {
    const uint64_t n = std::min(kStageBytes, len - done);
    if (send) {
      KVLANE_RETURN_IF_ERROR(CopyFromDevice(stage, at + done, n));
      KVLANE_RETURN_IF_ERROR(control->SendRaw(stage, n));
    } else {
      KVLANE_RETURN_IF_ERROR(control->ReceiveRaw(stage, n));
      KVLANE_RETURN_IF_ERROR(CopyToDevice(at + done, stage, n));
    }
  }
  return kvlane::Status::Ok();
}

// Sends or receives every extent of `sides` ([request][pair]) over the control
// connection: straight from and into a host pool, through `stage` for a device pool.
kvlane::Status StreamExtents(ControlChannel* control, const PoolView& pool, void* stage,
                             const PoolList& list, const RequestIndices& sides, bool send) {
  for (const auto& request : sides) {
    for (uint32_t idx : request) {
      const Extent& e = list.extents[idx];
      uint8_t* at = pool.base + e.offset;
      if (stage != nullptr) {
        KVLANE_RETURN_IF_ERROR(StreamStaged(control, at, e.len, stage, send));
      } else {
        KVLANE_RETURN_IF_ERROR(send ? control->SendRaw(at, e.len) : control->ReceiveRaw(at, e.len));
      }
    }
  }
  return kvlane::Status::Ok();
}

}  // namespace

ReferenceFigures MemcpyReference(uint8_t* pool, const PoolList& list, const BurstMap& map,
                                 kvlane::Op op, int reps) {
  auto copy = [pool](uint64_t dst, uint64_t src, uint64_t len) {
    std::memmove(pool + dst, pool + src, len);
    return true;
  };
  std::vector<double> ms;
  for (int i = 0; i <= reps; ++i) {  // rep 0 is the warm-up
    Clock::time_point t0 = Clock::now();
    CopyPairs(list, map, op, copy);
    if (i > 0) ms.push_back(MsSince(t0));
  }
  return Figures("memcpy", ms, map.burst_bytes);
}

ReferenceFigures DeviceCopyReference(uint8_t* pool, const PoolList& list, const BurstMap& map,
                                     kvlane::Op op, int reps) {
  auto copy = [pool](uint64_t dst, uint64_t src, uint64_t len) {
    return CopyDeviceToDevice(pool + dst, pool + src, len).ok();
  };
  std::vector<double> ms;
  for (int i = 0; i <= reps; ++i) {  // rep 0 is the warm-up
    Clock::time_point t0 = Clock::now();
    if (!CopyPairs(list, map, op, copy)) return {"cudaMemcpy-failed", 0, 0};
    if (i > 0) ms.push_back(MsSince(t0));
  }
  return Figures("cudaMemcpy", ms, map.burst_bytes);
}

kvlane::Result<ReferenceFigures> SocketReferenceInitiator(ControlChannel* control,
                                                          const PoolView& pool,
                                                          const PoolList& list, const BurstMap& map,
                                                          kvlane::Op op, int reps) {
  KVLANE_ASSIGN_OR_RETURN(Pinned stage, StageFor(pool));
  std::vector<double> ms;
  for (int i = 0; i <= reps; ++i) {  // rep 0 is the warm-up
    Clock::time_point t0 = Clock::now();
    KVLANE_RETURN_IF_ERROR(control->Send({{"type", "ref_go"}}));
    KVLANE_RETURN_IF_ERROR(
        StreamExtents(control, pool, stage.get(), list, map.initiator, Pushes(op)));
    if (Pushes(op)) KVLANE_RETURN_IF_ERROR(control->Expect("ref_done").status());
    if (i > 0) ms.push_back(MsSince(t0));
  }
  return Figures(stage ? "socket-staged" : "socket", ms, map.burst_bytes);
}

kvlane::Status SocketReferenceTarget(ControlChannel* control, const PoolView& pool,
                                     const PoolList& list, const BurstMap& map, kvlane::Op op,
                                     int reps) {
  KVLANE_ASSIGN_OR_RETURN(Pinned stage, StageFor(pool));
  for (int i = 0; i <= reps; ++i) {
    KVLANE_RETURN_IF_ERROR(control->Expect("ref_go").status());
    KVLANE_RETURN_IF_ERROR(
        StreamExtents(control, pool, stage.get(), list, map.target, !Pushes(op)));
    if (Pushes(op)) KVLANE_RETURN_IF_ERROR(control->Send({{"type", "ref_done"}}));
  }
  return kvlane::Status::Ok();
}

}  // namespace kvbench
