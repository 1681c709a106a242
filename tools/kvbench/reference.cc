#include "reference.h"

#include <chrono>
#include <cstring>

#include "device_memory.h"
#include "stats.h"

namespace kvbench {
namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

void CopyPairs(uint8_t* pool, const PoolList& list, const BurstMap& map) {
  for (size_t r = 0; r < map.target.size(); ++r) {
    for (size_t k = 0; k < map.target[r].size(); ++k) {
      const Extent& src = list.extents[map.target[r][k]];
      const Extent& dst = list.extents[map.initiator[r][k]];
      std::memmove(pool + dst.offset, pool + src.offset, src.len);
    }
  }
}

ReferenceFigures Figures(const char* method, const std::vector<double>& ms, uint64_t bytes) {
  double p50 = Percentile(ms, 0.5);
  return {method, p50, GigabytesPerSecond(bytes, p50)};
}

}  // namespace

ReferenceFigures MemcpyReference(uint8_t* pool, const PoolList& list, const BurstMap& map,
                                 int reps) {
  CopyPairs(pool, list, map);  // warm-up
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    Clock::time_point t0 = Clock::now();
    CopyPairs(pool, list, map);
    ms.push_back(MsSince(t0));
  }
  return Figures("memcpy", ms, map.burst_bytes);
}

ReferenceFigures DeviceCopyReference(uint8_t* pool, const PoolList& list, const BurstMap& map,
                                     int reps) {
  std::vector<double> ms;
  for (int i = 0; i <= reps; ++i) {  // rep 0 is the warm-up
    Clock::time_point t0 = Clock::now();
    for (size_t r = 0; r < map.target.size(); ++r) {
      for (size_t k = 0; k < map.target[r].size(); ++k) {
        const Extent& src = list.extents[map.target[r][k]];
        const Extent& dst = list.extents[map.initiator[r][k]];
        if (!CopyDeviceToDevice(pool + dst.offset, pool + src.offset, src.len).ok()) {
          return {"cudaMemcpy-failed", 0, 0};
        }
      }
    }
    if (i > 0) ms.push_back(MsSince(t0));
  }
  return Figures("cudaMemcpy", ms, map.burst_bytes);
}

kvlane::Result<ReferenceFigures> SocketReferenceFetch(ControlChannel* control, uint8_t* pool,
                                                      const PoolList& list, const BurstMap& map,
                                                      int reps) {
  std::vector<double> ms;
  for (int i = 0; i <= reps; ++i) {  // rep 0 is the warm-up
    Clock::time_point t0 = Clock::now();
    KVLANE_RETURN_IF_ERROR(control->Send({{"type", "ref_go"}}));
    for (const auto& request : map.initiator) {
      for (uint32_t idx : request) {
        const Extent& e = list.extents[idx];
        KVLANE_RETURN_IF_ERROR(control->ReceiveRaw(pool + e.offset, e.len));
      }
    }
    if (i > 0) ms.push_back(MsSince(t0));
  }
  return Figures("socket", ms, map.burst_bytes);
}

kvlane::Status SocketReferenceServe(ControlChannel* control, const uint8_t* pool,
                                    const PoolList& list, const BurstMap& map, int reps) {
  for (int i = 0; i <= reps; ++i) {
    KVLANE_RETURN_IF_ERROR(control->Expect("ref_go").status());
    for (const auto& request : map.target) {
      for (uint32_t idx : request) {
        const Extent& e = list.extents[idx];
        KVLANE_RETURN_IF_ERROR(control->SendRaw(pool + e.offset, e.len));
      }
    }
  }
  return kvlane::Status::Ok();
}

}  // namespace kvbench
