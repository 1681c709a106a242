#include "target_loop.h"

#include <fmt/format.h>

#include "common/stop_signal.h"
#include "pool_ops.h"
#include "reference.h"

namespace kvbench {

using nlohmann::json;

kvlane::Status TargetLoop::Run() {
  while (true) {
    KVLANE_ASSIGN_OR_RETURN(json m, s_->control().Receive());
    std::string type = m.value("type", "");
    if (type == "done") return s_->control().Send({{"type", "bye"}});
    if (type == "error") return kvlane::Status::Backend("initiator: " + m.value("message", ""));
    if (type == "row" && kvlane_tools::StopSignal() != 0) {  // no new row: says why, waits for done
      KVLANE_RETURN_IF_ERROR(s_->control().Send(
          {{"type", "stopped"}, {"signal", kvlane_tools::SignalName(kvlane_tools::StopSignal())}}));
      continue;
    }
    kvlane::Status s = type == "row"   ? HandleRow(m)
                       : type == "ref" ? HandleReference(m)
                                       : kvlane::Status::InvalidArgument("unexpected " + type);
    if (!s.ok()) {  // tells the initiator why, unless the connection was aborted
      (void)s_->control().Send({{"type", "error"}, {"message", s.message()}});
      return s;
    }
  }
}

kvlane::Result<const PlanPoint*> TargetLoop::PointFor(const json& m) {
  uint64_t isl = m.value("isl", uint64_t{0});
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

kvlane::Status TargetLoop::HandleRow(const json& m) {
  KVLANE_ASSIGN_OR_RETURN(const PlanPoint* p, PointFor(m));
  BurstMap map = MakeBurstMap(list_, p->demand, m.value("batch", uint64_t{1}), s_->config().seed);
  uint64_t epoch = m.value("epoch", uint64_t{0});
  bool push = m.value("op", "") == "push";  // push lands here; pull reads from here
  PoolView pool = s_->pool_view();
  const bool slow = s_->config().fault == "slow-target-prepare" && epoch > 1;
  if (slow) fmt::print(stderr, "[kvbench] injected fault: the target prepares until stopped\n");
  do {
    KVLANE_RETURN_IF_ERROR(push ? WipeDestinations(pool, list_, map.target)
                                : FillSources(pool, list_, map.target, kTargetRank, epoch));
  } while (slow);
  KVLANE_RETURN_IF_ERROR(s_->control().Send({{"type", "ready"}}));
  KVLANE_ASSIGN_OR_RETURN(json check, s_->control().Expect("check"));
  LocalCheck mine = LocalCheck::kNotVerifier;
  std::string detail;
  if (push) {
    if (s_->config().fault == "flip-byte") {
      KVLANE_RETURN_IF_ERROR(FlipOneLandedByte(pool, list_, map.target));
    }
    KVLANE_ASSIGN_OR_RETURN(
        VerifyResult v,
        VerifyDestinations(pool, list_, map.target, map.initiator, kInitiatorRank, epoch));
    mine = v.ok() ? LocalCheck::kPass : LocalCheck::kFail;
    detail = fmt::format("target: checked {} B, {} mismatching{}", v.checked, v.mismatches,
                         v.ok() ? "" : fmt::format(", first at pool offset {}", v.first_mismatch));
  }
  return s_->control().Send(
      {{"type", "verdict"}, {"local", LocalCheckName(mine)}, {"detail", detail}});
}

kvlane::Status TargetLoop::HandleReference(const json& m) {
  KVLANE_ASSIGN_OR_RETURN(const PlanPoint* p, PointFor(m));
  BurstMap map = MakeBurstMap(list_, p->demand, m.value("batch", uint64_t{1}), s_->config().seed);
  kvlane::Op op = m.value("op", "") == "push" ? kvlane::Op::kWrite : kvlane::Op::kRead;
  return SocketReferenceTarget(&s_->control(), s_->pool_view(), list_, map, op, m.value("reps", 1),
                               ReferenceFaultFor(s_->config().fault, "target"));
}

}  // namespace kvbench
