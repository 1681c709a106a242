// The target role: owns one buffer, answers the source's fill and verify
// requests (outside the source's timed region) until told to quit.
#include <unistd.h>

#include <cstdio>
#include <vector>

#include "buffers.h"
#include "control.h"
#include "fault.h"
#include "oracle.h"
#include "request.h"
#include "worker.h"

namespace lanebench {
namespace {

struct TargetState {
  uint32_t index = 0;  // this target's: the oracle's Slot::target
  BufferSpace* space = nullptr;
  uint8_t* buf = nullptr;
  uint64_t bytes = 0;
  std::vector<uint8_t> staging;
};

// A request (request.h) -> the reply to send. "flip" (--inject-fault, fault.h)
// flips the middle byte of what landed there.
kvlane::Result<std::string> Handle(TargetState& t, const std::string& message) {
  KVLANE_ASSIGN_OR_RETURN(const TargetRequest r, ParseRequest(message, t.bytes));
  const auto& [cmd, epoch, src, off, len] = r;
  const std::string e = " " + std::to_string(epoch);
  const Slot slot{t.index, off};  // where the payload belongs: here, at the offset asked
  if (cmd == "fill") {
    FillPayload(t.staging.data(), len, src, epoch, slot);
    KVLANE_RETURN_IF_ERROR(t.space->Upload(t.buf + off, t.staging.data(), len));
    return "ready" + e;
  }
  if (cmd == "flip") {
    KVLANE_RETURN_IF_ERROR(FlipByteAt(*t.space, t.buf + off, len / 2));
    return "flipped" + e;
  }
  KVLANE_RETURN_IF_ERROR(t.space->Download(t.staging.data(), t.buf + off, len));
  int64_t bad = FirstMismatch(t.staging.data(), len, src, epoch, slot);
  return bad < 0 ? "ok" + e : "bad" + e + " " + std::to_string(bad);
}

kvlane::Status ServeLoop(kvlane::Agent* agent, TargetState& t,
                         std::chrono::steady_clock::time_point deadline) {
  ControlLink link(agent);
  for (;;) {
    KVLANE_ASSIGN_OR_RETURN(std::string m, link.Await("source", deadline));
    if (m == "quit") return kvlane::Status::Ok();
    KVLANE_ASSIGN_OR_RETURN(std::string reply, Handle(t, m));
    KVLANE_RETURN_IF_ERROR(link.Send("source", reply));
  }
}

kvlane::Status Serve(const std::string& dir, int index) {
  KVLANE_ASSIGN_OR_RETURN(RunSpec spec, ReadSpec(dir));
  const auto deadline = RunDeadline(spec);
  KVLANE_RETURN_IF_ERROR(EnterWorkerCpus(spec));  // before any thread starts (CUDA's too)
  if (index < 0 || index >= static_cast<int>(spec.target_bytes.size()))
    return kvlane::Status::InvalidArgument("no target " + std::to_string(index) + " in the spec");
  KVLANE_ASSIGN_OR_RETURN(auto space, MakeBufferSpace(spec.memory, /*role=*/1));
  KVLANE_ASSIGN_OR_RETURN(auto agent, MakeAgent(spec, TargetName(index)));
  TargetState t{static_cast<uint32_t>(index), space.get(), nullptr, spec.target_bytes[index], {}};
  t.staging.resize(t.bytes);
  KVLANE_ASSIGN_OR_RETURN(t.buf, space->Allocate(t.bytes));
  KVLANE_RETURN_IF_ERROR(
      agent->RegisterMemory(t.buf, t.bytes, space->kind(), space->device()).status());
  KVLANE_RETURN_IF_ERROR(WriteFileAtomic(TargetPidPath(dir, index), std::to_string(getpid())));
  KVLANE_RETURN_IF_ERROR(WriteFileAtomic(TargetAddrPath(dir, index),
                                         std::to_string(reinterpret_cast<uintptr_t>(t.buf))));
  KVLANE_ASSIGN_OR_RETURN(std::string blob, agent->ExportMetadata());
  KVLANE_RETURN_IF_ERROR(WriteFileAtomic(TargetMetaPath(dir, index), blob));
  KVLANE_ASSIGN_OR_RETURN(std::string source_blob, AwaitFile(SourceMetaPath(dir), deadline));
  KVLANE_RETURN_IF_ERROR(agent->LoadPeer(source_blob).status());
  return ServeLoop(agent.get(), t, deadline);
}

}  // namespace

int RunTarget(const std::string& dir, int index) {
  kvlane::Status s = Serve(dir, index);
  if (s.ok()) return 0;
  std::fprintf(stderr, "lanebench target%d: %s\n", index, s.ToString().c_str());
  return 1;
}

}  // namespace lanebench
