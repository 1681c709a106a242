#include "source_payload.h"

#include <algorithm>

#include "oracle.h"
#include "worker.h"

namespace lanebench {
namespace {

constexpr uint8_t kReadWipe = 0xEE;    // a read's destination, before the timed region
constexpr uint8_t kWriteScrub = 0x5A;  // a write's source, after it

// Where transfer `x`'s payload belongs (the target fills and checks it there).
Slot SlotOf(const XferSpec& x) { return {static_cast<uint32_t>(x.peer), x.remote_offset}; }

// Sends one request per transfer to its target and checks every reply.
kvlane::Result<std::string> AskTargets(SourceRig& rig, const char* cmd, uint64_t epoch,
                                       const char* expect) {
  for (const SourceXfer& x : rig.xfers) {
    uint32_t src = rig.op == kvlane::Op::kRead ? x.spec.peer + 1 : kSourceRank;
    KVLANE_RETURN_IF_ERROR(rig.link->Send(
        TargetName(x.spec.peer),
        std::string(cmd) + " " + std::to_string(epoch) + " " + std::to_string(src) + " " +
            std::to_string(x.spec.remote_offset) + " " + std::to_string(x.spec.bytes)));
  }
  std::string failure;
  const std::string want = std::string(expect) + " " + std::to_string(epoch);
  for (const SourceXfer& x : rig.xfers) {
    KVLANE_ASSIGN_OR_RETURN(std::string reply,
                            rig.link->Await(TargetName(x.spec.peer), rig.deadline));
    if (reply != want && failure.empty())
      failure = x.spec.name + ": target replied '" + reply + "'";
  }
  return failure;
}

// Every transfer's local buffer set to `byte`.
kvlane::Status FillLocal(SourceRig& rig, uint8_t byte) {
  for (SourceXfer& x : rig.xfers) {
    std::fill_n(rig.staging.begin(), x.spec.bytes, byte);
    KVLANE_RETURN_IF_ERROR(rig.space->Upload(x.local, rig.staging.data(), x.spec.bytes));
  }
  return kvlane::Status::Ok();
}

// A read's local buffers against epoch's oracle; `when` ends a failure's text.
kvlane::Result<std::string> CheckLocal(SourceRig& rig, uint64_t epoch, const char* when) {
  for (SourceXfer& x : rig.xfers) {
    KVLANE_RETURN_IF_ERROR(rig.space->Download(rig.staging.data(), x.local, x.spec.bytes));
    int64_t bad =
        FirstMismatch(rig.staging.data(), x.spec.bytes, x.spec.peer + 1, epoch, SlotOf(x.spec));
    if (bad >= 0) return x.spec.name + ": first bad byte at offset " + std::to_string(bad) + when;
  }
  return std::string();
}

}  // namespace

kvlane::Status Stage(SourceRig& rig, uint64_t epoch) {
  if (rig.op == kvlane::Op::kRead) {
    KVLANE_ASSIGN_OR_RETURN(std::string failure, AskTargets(rig, "fill", epoch, "ready"));
    if (!failure.empty()) return kvlane::Status::Backend(failure);
    return FillLocal(rig, kReadWipe);
  }
  for (SourceXfer& x : rig.xfers) {
    FillPayload(rig.staging.data(), x.spec.bytes, kSourceRank, epoch, SlotOf(x.spec));
    KVLANE_RETURN_IF_ERROR(rig.space->Upload(x.local, rig.staging.data(), x.spec.bytes));
  }
  return kvlane::Status::Ok();
}

kvlane::Result<std::string> Overwrite(SourceRig& rig, uint64_t epoch) {
  if (rig.op == kvlane::Op::kWrite) {
    KVLANE_RETURN_IF_ERROR(FillLocal(rig, kWriteScrub));
    return std::string();
  }
  KVLANE_ASSIGN_OR_RETURN(std::string failure, CheckLocal(rig, epoch, ""));
  const uint64_t scrub = epoch | kScrubEpochBit;
  KVLANE_ASSIGN_OR_RETURN(std::string refused, AskTargets(rig, "fill", scrub, "ready"));
  if (!refused.empty()) return kvlane::Status::Backend(refused);
  return failure;
}

kvlane::Result<std::string> Verify(SourceRig& rig, uint64_t epoch) {
  if (rig.op == kvlane::Op::kWrite) return AskTargets(rig, "verify", epoch, "ok");
  return CheckLocal(rig, epoch, " (moved after completion)");
}

}  // namespace lanebench
