#include "reference.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <new>

#include "device_memory.h"
#include "json_field.h"
#include "path_choice.h"
#include "stats.h"

namespace kvbench {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;
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

// Calls fn(source, destination) for every pair of extents the burst moves, in
// request order; false when fn answered false (the walk stops there).
template <typename Fn>
bool ForEachPair(const PoolList& list, const BurstMap& map, kvlane::Op op, Fn fn) {
  const RequestIndices &from = From(map, op), &to = To(map, op);
  for (size_t r = 0; r < from.size(); ++r) {
    for (size_t k = 0; k < from[r].size(); ++k) {
      if (!fn(list.extents[from[r][k]], list.extents[to[r][k]])) return false;
    }
  }
  return true;
}

// Runs copy(dst, src, len) over every pair, counting the bytes to `pacer`; false
// as soon as one fails or the pacer says to stop.
template <typename Copy>
bool CopyPairs(const PoolList& list, const BurstMap& map, kvlane::Op op, Copy copy,
               StopPacer* pacer) {
  return ForEachPair(list, map, op, [&](const Extent& src, const Extent& dst) {
    return copy(dst.offset, src.offset, src.len) && !pacer->Done(src.len);
  });
}

// The longest pair whose source and destination are the same extent (0: none).
uint64_t LargestSelfPair(const PoolList& list, const BurstMap& map, kvlane::Op op) {
  uint64_t most = 0;
  ForEachPair(list, map, op, [&](const Extent& src, const Extent& dst) {
    if (dst.offset == src.offset) most = std::max(most, src.len);
    return true;
  });
  return most;
}

ReferenceFigures Figures(const std::string& method, const std::vector<double>& ms, uint64_t bytes) {
  double p50 = Percentile(ms, 0.5);
  return {method, p50, GigabytesPerSecond(bytes, p50)};
}

// `reps` timed reps of `copy` over every pair after one warm-up, under `method`;
// "<method>-failed" when a copy fails, nullopt when `stop` answered true (asked
// before each rep after the warm-up, and between pairs).
template <typename Copy>
std::optional<ReferenceFigures> CopyReference(const std::string& method, const PoolList& list,
                                              const BurstMap& map, kvlane::Op op, int reps,
                                              const StopCheck& stop, Copy copy) {
  bool stopped = false;
  const StopCheck ask = stop ? StopCheck([&] { return stopped = stop(); }) : StopCheck();
  StopPacer pacer(ask);
  std::vector<double> ms;
  for (int i = 0; i <= reps; ++i) {  // rep 0 is the warm-up
    if (i > 0 && ask && ask()) return std::nullopt;
    Clock::time_point t0 = Clock::now();
    if (!CopyPairs(list, map, op, copy, &pacer)) {
      if (stopped) return std::nullopt;
      return ReferenceFigures{method + "-failed", 0, 0};
    }
    if (i > 0) ms.push_back(MsSince(t0));
  }
  return Figures(method, ms, map.burst_bytes);
}

// A device pool's socket reference stages each extent through one pinned host
// buffer, this many bytes at a time.
constexpr uint64_t kStageBytes = 4ull << 20;

using Pinned = std::unique_ptr<void, void (*)(void*)>;

// The pinned staging buffer for a device pool; none (null) for a host pool. Each
// rank decides for its own pool, as the engine's tcp transport stages on the side
// that holds device memory only (path_choice.h: StagesOn).
kvlane::Result<Pinned> StageFor(const PoolView& pool, ReferenceFault fault) {
  if (fault == ReferenceFault::kSetup) {
    return kvlane::Status::Backend("injected fault: the socket reference's staging buffer");
  }
  if (pool.kind != kvlane::MemoryKind::kCuda) return Pinned(nullptr, PinnedFree);
  KVLANE_ASSIGN_OR_RETURN(void* p, PinnedAlloc(kStageBytes));
  return Pinned(p, PinnedFree);
}

// One rank's side of the byte stream: its control connection, its pool and, for
// a device pool, its pinned staging buffer (else null).
struct Stream {
  ControlChannel* control;
  PoolView pool;
  void* stage;
  ReferenceFault fault;
};

// Sends (cudaMemcpy to the stage, then send) or receives (receive into the stage,
// then cudaMemcpy) `len` device bytes at `at`, one chunk after the other: no overlap.
kvlane::Status StreamStaged(const Stream& st, uint8_t* at, uint64_t len, bool send) {
  for (uint64_t done = 0; done < len; done += kStageBytes) {
    const uint64_t n = std::min(kStageBytes, len - done);
    if (send) {
      KVLANE_RETURN_IF_ERROR(CopyFromDevice(st.stage, at + done, n));
      KVLANE_RETURN_IF_ERROR(st.control->SendRaw(st.stage, n));
    } else {
      KVLANE_RETURN_IF_ERROR(st.control->ReceiveRaw(st.stage, n));
      KVLANE_RETURN_IF_ERROR(CopyToDevice(at + done, st.stage, n));
    }
  }
  return kvlane::Status::Ok();
}

kvlane::Status StreamExtent(const Stream& st, const Extent& e, bool send) {
  uint8_t* at = st.pool.base + e.offset;
  if (st.stage != nullptr) return StreamStaged(st, at, e.len, send);
  return send ? st.control->SendRaw(at, e.len) : st.control->ReceiveRaw(at, e.len);
}

// Sends or receives every extent of `sides` ([request][pair]) over the control
// connection: straight from and into a host pool, through the stage for a device
// pool. ReferenceFault::kStream fails after the first extent.
kvlane::Status StreamExtents(const Stream& st, const PoolList& list, const RequestIndices& sides,
                             bool send) {
  for (const auto& request : sides) {
    for (uint32_t idx : request) {
      KVLANE_RETURN_IF_ERROR(StreamExtent(st, list.extents[idx], send));
      if (st.fault == ReferenceFault::kStream) {
        return kvlane::Status::Backend("injected fault: partway through the socket reference");
      }
    }
  }
  return kvlane::Status::Ok();
}

// One rep on the initiator: "ref_go", the raw bytes, then the target's answer,
// "ref_done", or "stopped" (the target was stopped: the rep ran whole, and its
// signal goes to *target_stop, the status kCanceled). Its time: to the last byte
// received (pull; the answer comes after it) or to the answer (push).
kvlane::Result<double> InitiatorRep(const Stream& st, const PoolList& list, const BurstMap& map,
                                    kvlane::Op op, std::string* target_stop) {
  const Clock::time_point t0 = Clock::now();
  KVLANE_RETURN_IF_ERROR(st.control->Send({{"type", "ref_go"}}));
  KVLANE_RETURN_IF_ERROR(StreamExtents(st, list, map.initiator, Pushes(op)));
  double ms = MsSince(t0);
  KVLANE_ASSIGN_OR_RETURN(json answer, st.control->ExpectOneOf({"ref_done", "stopped"}));
  if (Pushes(op)) ms = MsSince(t0);
  if (answer.value("type", "") == "stopped") {
    *target_stop = PeerSignal(answer);
    return kvlane::Status::Canceled("reference abandoned: the target was stopped");
  }
  return ms;
}

// The initiator's timed reps; the time of each after the warm-up. kCanceled, with
// nothing sent, when `stop` answers true before a rep, or once the target says it
// was stopped.
kvlane::Result<std::vector<double>> InitiatorReps(const Stream& st, const PoolList& list,
                                                  const BurstMap& map, kvlane::Op op, int reps,
                                                  const StopCheck& stop, std::string* target_stop) {
  std::vector<double> ms;
  for (int i = 0; i <= reps; ++i) {  // rep 0 is the warm-up
    if (stop && stop()) return kvlane::Status::Canceled("reference abandoned: the run is stopping");
    KVLANE_ASSIGN_OR_RETURN(double rep_ms, InitiatorRep(st, list, map, op, target_stop));
    if (i > 0) ms.push_back(rep_ms);
  }
  return ms;
}

// kCanceled when the initiator abandons the row ("abandon" in place of "ref_go"), or
// when `stop` answers true at the end of a rep but the last, nothing sent in place
// of that rep's "ref_done" (the caller says "stopped" there).
kvlane::Status TargetReps(const Stream& st, const PoolList& list, const BurstMap& map,
                          kvlane::Op op, int reps, const StopCheck& stop) {
  for (int i = 0; i <= reps; ++i) {
    KVLANE_ASSIGN_OR_RETURN(json go, st.control->ExpectOneOf({"ref_go", "abandon"}));
    if (go.value("type", "") == "abandon") {
      return kvlane::Status::Canceled("the initiator abandoned the row");
    }
    KVLANE_RETURN_IF_ERROR(StreamExtents(st, list, map.target, !Pushes(op)));
    if (i < reps && stop && stop()) return kvlane::Status::Canceled("this rank was stopped");
    KVLANE_RETURN_IF_ERROR(st.control->Send({{"type", "ref_done"}}));
  }
  return kvlane::Status::Ok();
}

}  // namespace

ReferenceFault ReferenceFaultFor(const std::string& flag, const std::string& role) {
  if (flag == "ref-" + role + "-setup") return ReferenceFault::kSetup;
  if (flag == "ref-" + role + "-stream") return ReferenceFault::kStream;
  return ReferenceFault::kNone;
}

std::optional<ReferenceFigures> MemcpyReference(uint8_t* pool, const PoolList& list,
                                                const BurstMap& map, kvlane::Op op, int reps,
                                                const StopCheck& stop) {
  // A pair whose two sides are the same bytes of this pool (contig at batch 1:
  // each rank's request 0 sits at the same offset) is copied into a scratch
  // buffer instead: a memmove of a range onto itself returns at once and would
  // make the reference time nothing. The warm-up rep faults its pages in.
  // The scratch holds at most kScratchBytes (far past any cache: the copy stays
  // bound by memory), a longer pair going through it window by window.
  constexpr uint64_t kScratchBytes = 256ull << 20;
  const uint64_t self = std::min(LargestSelfPair(list, map, op), kScratchBytes);
  std::unique_ptr<uint8_t[]> scratch(self != 0 ? new (std::nothrow) uint8_t[self] : nullptr);
  if (self != 0 && scratch == nullptr) return ReferenceFigures{"memcpy-failed", 0, 0};
  return CopyReference("memcpy", list, map, op, reps, stop,
                       [pool, s = scratch.get(), self](uint64_t dst, uint64_t src, uint64_t len) {
                         if (dst != src) {
                           std::memmove(pool + dst, pool + src, len);
                           return true;
                         }
                         for (uint64_t at = 0; at < len; at += self)
                           std::memcpy(s, pool + src + at, std::min(self, len - at));
                         return true;
                       });
}

std::optional<ReferenceFigures> DeviceCopyReference(uint8_t* pool, const PoolList& list,
                                                    const BurstMap& map, kvlane::Op op, int reps,
                                                    const StopCheck& stop) {
  return CopyReference("cudaMemcpy", list, map, op, reps, stop,
                       [pool](uint64_t dst, uint64_t src, uint64_t len) {
                         return CopyDeviceToDevice(pool + dst, pool + src, len).ok();
                       });
}

kvlane::Result<ReferenceFigures> SocketReferenceInitiator(
    ControlChannel* control, const json& ready, const PoolView& pool, const PoolList& list,
    const BurstMap& map, kvlane::Op op, int reps, ReferenceFault fault, const StopCheck& stop,
    std::string* target_stop) {
  KVLANE_ASSIGN_OR_RETURN(Pinned stage, StageFor(pool, fault));
  std::string told;
  auto ms = InitiatorReps({control, pool, stage.get(), fault}, list, map, op, reps, stop, &told);
  if (target_stop != nullptr && !told.empty()) *target_stop = told;
  if (ms.status().code() == kvlane::Code::kCanceled && !control->aborted()) return ms.status();
  if (!ms.ok()) {
    control->Abort();  // the raw stream may be cut partway: the target must not wait on it
    return ms.status();
  }
  const std::string method =
      SocketReferenceMethod(TypedField<bool>(ready, "staged").value_or(false), stage != nullptr);
  return Figures(method, ms.value(), map.burst_bytes);
}

kvlane::Status SocketReferenceTarget(ControlChannel* control, const PoolView& pool,
                                     const PoolList& list, const BurstMap& map, kvlane::Op op,
                                     int reps, ReferenceFault fault, const StopCheck& stop) {
  KVLANE_ASSIGN_OR_RETURN(Pinned stage, StageFor(pool, fault));
  KVLANE_RETURN_IF_ERROR(control->Send({{"type", "ref_ready"}, {"staged", stage != nullptr}}));
  kvlane::Status s = TargetReps({control, pool, stage.get(), fault}, list, map, op, reps, stop);
  const bool abandoned = s.code() == kvlane::Code::kCanceled && !control->aborted();
  if (!s.ok() && !abandoned) control->Abort();  // as on the initiator
  return s;
}

}  // namespace kvbench
