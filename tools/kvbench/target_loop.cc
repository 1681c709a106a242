#include "target_loop.h"

#include <fmt/format.h>

#include <algorithm>
#include <thread>

#include "common/stop_signal.h"
#include "json_field.h"
#include "pattern.h"
#include "pool_ops.h"
#include "reference.h"

namespace kvbench {

using nlohmann::json;

namespace {

constexpr int64_t kMaxReps = int64_t{1} << 30;  // the slow-reference fault's count

}  // namespace

kvlane::Result<Asked> ReadAsked(const json& m, const PlanPoint& p) {
  Asked a;
  const std::string op = TypedField<std::string>(m, "op").value_or("");
  if (op != "push" && op != "pull")
    return kvlane::Status::InvalidArgument(
        "control: the initiator asked for an op other than push or pull");
  a.push = op == "push";
  const std::optional<uint64_t> batch = TypedField<uint64_t>(m, "batch");
  if (!batch.has_value() ||
      std::find(p.batches.begin(), p.batches.end(), *batch) == p.batches.end())
    return kvlane::Status::InvalidArgument(fmt::format(
        "control: the initiator asked for a batch the plan does not measure at isl {}", p.isl));
  a.batch = *batch;
  a.epoch = TypedField<uint64_t>(m, "epoch").value_or(0);
  const std::optional<int64_t> reps =
      FieldOrNull(m, "reps").is_null() ? 1 : TypedField<int64_t>(m, "reps");
  if (!reps.has_value() || *reps < 0 || *reps > kMaxReps)
    return kvlane::Status::InvalidArgument(
        "control: the initiator asked for a reference rep count out of range");
  a.reps = static_cast<int>(*reps);
  return a;
}

std::chrono::milliseconds BusyEvery(const json& row, std::chrono::milliseconds own) {
  const int64_t theirs = TypedField<int64_t>(row, "control_timeout_ms").value_or(0);
  if (theirs <= 0) return own / 4;
  return std::min(std::chrono::milliseconds(theirs), own) / 4;
}

kvlane::Status TargetLoop::Run() {
  while (true) {
    KVLANE_ASSIGN_OR_RETURN(json m, Next());
    std::string type = m.value("type", "");
    if (type == "done") {
      initiator_valid_ = TypedField<bool>(m, "valid").value_or(true);
      complete_ = TypedField<bool>(m, "complete").value_or(true);
      stopped_by_ = PeerText(m, "stopped_by", 32, "");
      stopped_rank_ = PeerText(m, "stopped_rank", 32, "");
      return s_->control().Send({{"type", "bye"}});
    }
    if (type == "error")
      return kvlane::Status::Backend("initiator: " + PeerText(m, "message", 512, "?"));
    if (type == "abandon") {
      KVLANE_RETURN_IF_ERROR(s_->control().Send({{"type", "abandoned"}}));
      continue;
    }
    // Sent before the initiator read our "stopped": it abandons the row instead.
    if (told_stop_ && (type == "row" || type == "ref" || type == "check")) continue;
    kvlane::Status s = type == "row" ? HandleRow(m)
                       : type == "ref"
                           ? HandleReference(m)
                           : kvlane::Status::InvalidArgument("unexpected " + Printable(type, 64));
    if (s.ok() || EndedEarly(s)) continue;
    // Tells the initiator why, unless the connection was aborted.
    (void)s_->control().Send({{"type", "error"}, {"message", s.message()}});
    return s;
  }
}

bool TargetLoop::StopUntold() const { return !told_stop_ && kvlane_tools::StopSignal() != 0; }

kvlane::Status TargetLoop::TellStopped() {
  told_stop_ = true;
  return s_->control().Send(
      {{"type", "stopped"}, {"signal", kvlane_tools::SignalName(kvlane_tools::StopSignal())}});
}

kvlane::Result<json> TargetLoop::Next() {
  if (held_.has_value()) {
    json m = std::move(*held_);
    held_.reset();
    return m;
  }
  while (true) {
    if (StopUntold()) KVLANE_RETURN_IF_ERROR(TellStopped());
    auto m = s_->control().Receive([this] { return StopUntold(); });
    if (!m.ok() && EndedEarly(m.status())) {
      KVLANE_RETURN_IF_ERROR(TellStopped());
      m = s_->control().Receive();
    }
    // "busy": the initiator still works alone; the wait starts over.
    if (!m.ok() || m->value("type", "") != "busy") return m;
  }
}

kvlane::Result<json> TargetLoop::NextOf(const std::string& type) {
  KVLANE_ASSIGN_OR_RETURN(json m, Next());
  if (m.value("type", "") == type && !told_stop_) return m;
  held_ = std::move(m);
  return kvlane::Status::Canceled("the row ended early");
}

bool TargetLoop::Interrupted() const {
  return kvlane_tools::StopSignal() != 0 || s_->control().Pending();
}

bool TargetLoop::EndedEarly(const kvlane::Status& s) const {
  return s.code() == kvlane::Code::kCanceled && !s_->control().aborted();
}

bool TargetLoop::InterruptedWhileInitiatorWaits() {
  const auto now = std::chrono::steady_clock::now();
  if (now - initiator_waits_since_ >= busy_every_) {
    initiator_waits_since_ = now;
    // A failure (the initiator gone) shows at this rank's next exchange with it.
    (void)s_->control().Send({{"type", "busy"}});
  }
  return Interrupted();
}

kvlane::Status TargetLoop::Prepare(bool push, const BurstMap& map, uint64_t epoch,
                                   const StopCheck& stop) {
  PoolView pool = s_->pool_view();
  // The injected faults act on a row's first pattern, not on its last timed
  // burst's, but for stale-last-burst (its sources keep the first pattern).
  if (s_->config().fault == "stale-last-burst" && IsLastBurstEpoch(epoch) && !push)
    return kvlane::Status::Ok();
  const std::string fault = IsLastBurstEpoch(epoch) ? std::string() : s_->config().fault;
  const bool slow = fault == "slow-target-prepare" && epoch > 1;
  const bool lingers = fault == "long-target-prepare";
  const auto until = std::chrono::steady_clock::now() + 3 * s_->config().control_timeout_ms;
  if (slow) fmt::print(stderr, "[kvbench] injected fault: the target prepares until stopped\n");
  if (fault == "silent-target-prepare" && epoch == 1)
    SilentFor(2 * s_->config().control_timeout_ms);
  do {
    if ((slow || lingers) && stop()) return kvlane::Status::Canceled("the row ended early");
    KVLANE_RETURN_IF_ERROR(push ? WipeDestinations(pool, list_, map.target, stop)
                                : FillSources(pool, list_, map.target, kTargetRank, epoch, stop));
  } while (slow || (lingers && std::chrono::steady_clock::now() < until));
  return kvlane::Status::Ok();
}

void TargetLoop::SilentFor(std::chrono::milliseconds how_long) {
  fmt::print(stderr, "[kvbench] injected fault: the target is silent for {} ms\n",
             how_long.count());
  const auto until = std::chrono::steady_clock::now() + how_long;
  while (std::chrono::steady_clock::now() < until && !Interrupted()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

kvlane::Result<const PlanPoint*> TargetLoop::PointFor(const json& m) {
  const uint64_t isl = TypedField<uint64_t>(m, "isl").value_or(0);
  for (const PlanPoint& p : s_->plan().points) {
    if (p.isl != isl) continue;
    std::vector<uint64_t> shape;
    for (const GroupDemand& d : p.demand) shape.push_back(d.desc_bytes);
    if (shape != list_shape_) {
      list_ = MakePoolList(s_->plan().layout, p.demand);
      list_shape_ = shape;
    }
    return &p;
  }
  return kvlane::Status::NotFound(fmt::format("isl {} is not in the plan", isl));
}

// Each step gives up (kCanceled) when Interrupted(); the loop then tells the stop or
// reads the initiator's "abandon".
kvlane::Status TargetLoop::HandleRow(const json& m) {
  // The initiator waits for "ready" from the moment it sent the row.
  initiator_waits_since_ = std::chrono::steady_clock::now();
  busy_every_ = BusyEvery(m, s_->config().control_timeout_ms);
  KVLANE_ASSIGN_OR_RETURN(const PlanPoint* p, PointFor(m));
  KVLANE_ASSIGN_OR_RETURN(const Asked asked, ReadAsked(m, *p));
  BurstMap map = MakeBurstMap(list_, p->demand, asked.batch, s_->config().seed);
  const uint64_t epoch = asked.epoch;
  const bool push = asked.push;
  PoolView pool = s_->pool_view();
  const StopCheck stop = [this] { return InterruptedWhileInitiatorWaits(); };
  KVLANE_RETURN_IF_ERROR(Prepare(push, map, epoch, stop));
  KVLANE_RETURN_IF_ERROR(s_->control().Send({{"type", "ready"}}));
  KVLANE_ASSIGN_OR_RETURN(json check, NextOf("check"));
  initiator_waits_since_ = std::chrono::steady_clock::now();
  LocalCheck mine = LocalCheck::kNotVerifier;
  std::string detail;
  if (push) {
    if (s_->config().fault == "flip-byte") {
      KVLANE_RETURN_IF_ERROR(FlipOneLandedByte(pool, list_, map.target));
    }
    KVLANE_ASSIGN_OR_RETURN(
        VerifyResult v,
        VerifyDestinations(pool, list_, map.target, map.initiator, kInitiatorRank, epoch, stop));
    mine = v.ok() ? LocalCheck::kPass : LocalCheck::kFail;
    saw_mismatch_ = saw_mismatch_ || !v.ok();
    detail = fmt::format("target: checked {} B, {} mismatching{}", v.checked, v.mismatches,
                         v.ok() ? "" : fmt::format(", first at pool offset {}", v.first_mismatch));
  }
  return s_->control().Send(
      {{"type", "verdict"}, {"local", LocalCheckName(mine)}, {"detail", detail}});
}

kvlane::Status TargetLoop::HandleReference(const json& m) {
  KVLANE_ASSIGN_OR_RETURN(const PlanPoint* p, PointFor(m));
  KVLANE_ASSIGN_OR_RETURN(const Asked asked, ReadAsked(m, *p));
  BurstMap map = MakeBurstMap(list_, p->demand, asked.batch, s_->config().seed);
  const kvlane::Op op = asked.push ? kvlane::Op::kWrite : kvlane::Op::kRead;
  bool stopped = false;  // then the loop tells it (Next), answering the rep in flight
  const StopCheck stop = [this, &stopped] { return stopped = StopUntold(); };
  kvlane::Status s =
      SocketReferenceTarget(&s_->control(), s_->pool_view(), list_, map, op, asked.reps,
                            ReferenceFaultFor(s_->config().fault, "target"), stop);
  if (EndedEarly(s) && !stopped) held_ = json{{"type", "abandon"}};  // taken in place of "ref_go"
  return s;
}

}  // namespace kvbench
