#include "source_rig.h"

#include <algorithm>

#include "request.h"
#include "worker.h"

namespace lanebench {
namespace {

kvlane::Status AllocateLocal(SourceRig& rig) {
  uint64_t largest = 0;
  for (SourceXfer& x : rig.xfers) {
    KVLANE_ASSIGN_OR_RETURN(x.local, rig.space->Allocate(x.spec.bytes));
    KVLANE_RETURN_IF_ERROR(
        rig.agent->RegisterMemory(x.local, x.spec.bytes, rig.space->kind(), rig.space->device())
            .status());
    largest = std::max(largest, x.spec.bytes);
  }
  rig.staging.resize(largest);
  return kvlane::Status::Ok();
}

// Loads every target's metadata; returns each target's buffer address.
kvlane::Result<std::vector<uint64_t>> MeetTargets(SourceRig& rig, const std::string& dir) {
  std::vector<uint64_t> base;
  for (int i = 0; i < static_cast<int>(rig.spec.target_bytes.size()); ++i) {
    KVLANE_ASSIGN_OR_RETURN(std::string blob, AwaitFile(TargetMetaPath(dir, i), rig.deadline));
    KVLANE_ASSIGN_OR_RETURN(std::string addr, AwaitFile(TargetAddrPath(dir, i), rig.deadline));
    KVLANE_ASSIGN_OR_RETURN(std::string name, rig.agent->LoadPeer(blob));
    if (name != TargetName(i)) return kvlane::Status::InvalidArgument("unexpected peer " + name);
    uint64_t at = 0;  // the target's buffer address, as decimal digits (target.cc)
    if (!ParseDigits(addr, &at))
      return kvlane::Status::InvalidArgument("target " + std::to_string(i) +
                                             "'s address file is not a number");
    base.push_back(at);
  }
  KVLANE_ASSIGN_OR_RETURN(std::string self, rig.agent->ExportMetadata());
  KVLANE_RETURN_IF_ERROR(WriteFileAtomic(SourceMetaPath(dir), self));
  return base;
}

kvlane::Status PrepareTransfer(SourceRig& rig, SourceXfer& x, uint64_t remote_base) {
  kvlane::DescList local{rig.space->kind(), {}}, remote{rig.space->kind(), {}};
  local.Add(x.local, x.spec.bytes, rig.space->device());
  remote.Add(remote_base + x.spec.remote_offset, x.spec.bytes, rig.space->device());
  const std::string peer = TargetName(x.spec.peer);
  KVLANE_ASSIGN_OR_RETURN(kvlane::PreparedId l, rig.agent->PrepareLocal(local));
  KVLANE_ASSIGN_OR_RETURN(kvlane::PreparedId r, rig.agent->PrepareRemote(peer, remote));
  kvlane::XferOptions xo;
  xo.lane = x.spec.lane;
  xo.stripe = false;
  KVLANE_ASSIGN_OR_RETURN(x.handle, rig.agent->MakeTransfer(rig.op, l, {}, r, {}, {}, xo));
  KVLANE_ASSIGN_OR_RETURN(rig.transport, rig.agent->PeerTransport(peer));
  if (rig.transport != rig.spec.transport)
    return kvlane::Status::NotSupported("the engine chose '" + rig.transport + "' for " + peer);
  return kvlane::Status::Ok();
}

}  // namespace

kvlane::Result<std::unique_ptr<SourceRig>> SetUpSource(const RunSpec& spec,
                                                       const std::string& dir) {
  auto rig = std::make_unique<SourceRig>();
  rig->spec = spec;
  rig->dir = dir;
  rig->deadline = SourceDeadline(spec);
  rig->op = spec.op == "read" ? kvlane::Op::kRead : kvlane::Op::kWrite;
  KVLANE_ASSIGN_OR_RETURN(rig->space, MakeBufferSpace(spec.memory, /*role=*/0));
  KVLANE_ASSIGN_OR_RETURN(rig->agent, MakeAgent(spec, "source"));
  rig->link = std::make_unique<ControlLink>(rig->agent.get());
  for (const XferSpec& x : spec.xfers) rig->xfers.push_back({x, nullptr, {}});
  KVLANE_RETURN_IF_ERROR(AllocateLocal(*rig));
  KVLANE_ASSIGN_OR_RETURN(std::vector<uint64_t> base, MeetTargets(*rig, dir));
  for (SourceXfer& x : rig->xfers) {
    if (x.spec.peer < 0 || x.spec.peer >= static_cast<int>(base.size()))
      return kvlane::Status::InvalidArgument("transfer to a missing target");
    KVLANE_RETURN_IF_ERROR(PrepareTransfer(*rig, x, base[x.spec.peer]));
  }
  return rig;
}

}  // namespace lanebench
