#include "fault.h"

#include <charconv>

#include "worker.h"

namespace lanebench {

kvlane::Result<int> FlipByteIteration(const std::string& fault, int iters) {
  if (fault == "none") return 0;
  if (fault == "flip-byte") return 1;
  const std::string prefix = "flip-byte:";
  int n = 0;
  const char* end = fault.data() + fault.size();
  const bool named = fault.rfind(prefix, 0) == 0;
  auto [at, ec] = std::from_chars(fault.data() + (named ? prefix.size() : 0), end, n);
  if (!named || ec != std::errc() || at != end || n < 1 || n > iters) {
    const std::string allowed =
        ": none, flip-byte or flip-byte:N with N a measured iteration, 1.." +
        std::to_string(iters) + " (--iters)";
    return kvlane::Status::InvalidArgument("--inject-fault " + fault + allowed);
  }
  return n;
}

kvlane::Status FlipByteAt(BufferSpace& space, uint8_t* buf, uint64_t at) {
  uint8_t byte = 0;
  KVLANE_RETURN_IF_ERROR(space.Download(&byte, buf + at, 1));
  byte ^= 0x01;
  return space.Upload(buf + at, &byte, 1);
}

kvlane::Status FlipOneReceivedByte(SourceRig& rig, uint64_t epoch) {
  const SourceXfer& x = rig.xfers.front();
  if (rig.op == kvlane::Op::kRead) return FlipByteAt(*rig.space, x.local, x.spec.bytes / 2);
  const std::string e = std::to_string(epoch);
  // The target's "fill|verify|flip <epoch> <source-rank> <offset> <len>" (target.cc).
  const std::string flip = "flip " + e + " " + std::to_string(kSourceRank) + " " +
                           std::to_string(x.spec.remote_offset) + " " +
                           std::to_string(x.spec.bytes);
  KVLANE_RETURN_IF_ERROR(rig.link->Send(TargetName(x.spec.peer), flip));
  KVLANE_ASSIGN_OR_RETURN(std::string reply,
                          rig.link->Await(TargetName(x.spec.peer), rig.deadline));
  if (reply != "flipped " + e) {
    return kvlane::Status::Backend(x.spec.name + ": target replied '" + reply + "' to flip");
  }
  return kvlane::Status::Ok();
}

}  // namespace lanebench
