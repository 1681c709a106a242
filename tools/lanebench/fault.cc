#include "fault.h"

#include <signal.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <fstream>
#include <iterator>
#include <thread>

#include "control.h"
#include "request.h"
#include "worker.h"

namespace lanebench {
namespace {

kvlane::Status Refused(const std::string& text, int iters) {
  return kvlane::Status::InvalidArgument(
      "--inject-fault " + text +
      ": none, flip-byte, flip-byte:N, repost:N, stop-peer:N, or flip-byte:N:bulk|small or "
      "stop-peer:N:bulk|small (--shape mixed) with N a measured iteration, 1.." +
      std::to_string(iters) + " (--iters)");
}

// The transfer rig.spec.fault names; the first when it names none.
const SourceXfer& FaultXfer(const SourceRig& rig) {
  for (const SourceXfer& x : rig.xfers)
    if (x.spec.name == rig.spec.fault.xfer) return x;
  return rig.xfers.front();
}

// Whether process `pid` is stopped now (state T in /proc/<pid>/stat).
bool IsStopped(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close = stat.rfind(')');  // the command name may hold spaces
  return close != std::string::npos && stat.compare(close, 4, ") T ") == 0;
}

}  // namespace

kvlane::Result<FaultSpec> ParseFault(const std::string& text, int iters, const std::string& shape) {
  if (text == "none") return FaultSpec{};
  if (text == "flip-byte") return FaultSpec{"flip-byte", 1, ""};
  FaultSpec f;
  f.kind = text.substr(0, text.find(':'));
  const bool named = f.kind == "flip-byte" || f.kind == "stop-peer";  // may name a transfer
  if ((!named && f.kind != "repost") || f.kind.size() == text.size()) return Refused(text, iters);
  const char* end = text.data() + text.size();
  auto [at, ec] = std::from_chars(text.data() + f.kind.size() + 1, end, f.iteration);
  if (ec != std::errc() || f.iteration < 1 || f.iteration > iters) return Refused(text, iters);
  if (at == end) return f;
  if (!named) return Refused(text, iters);
  f.xfer = std::string(at, end);
  if (f.xfer != ":bulk" && f.xfer != ":small") return Refused(text, iters);
  f.xfer.erase(0, 1);
  if (shape != "mixed")
    return kvlane::Status::InvalidArgument("--inject-fault " + text +
                                           ": names a transfer of the mixed shape (--shape mixed)");
  return f;
}

kvlane::Status RepostAll(SourceRig& rig) {
  for (SourceXfer& x : rig.xfers) KVLANE_RETURN_IF_ERROR(rig.agent->Post(&x.handle));
  for (SourceXfer& x : rig.xfers) {
    const auto left = std::max(rig.deadline - std::chrono::steady_clock::now(),
                               std::chrono::steady_clock::duration::zero());
    KVLANE_RETURN_IF_ERROR(rig.agent->Wait(x.handle, left));
  }
  return kvlane::Status::Ok();
}

kvlane::Status StopPeer(SourceRig& rig) {
  const SourceXfer& x = FaultXfer(rig);
  KVLANE_ASSIGN_OR_RETURN(std::string text,
                          AwaitFile(TargetPidPath(rig.dir, x.spec.peer), rig.deadline));
  pid_t pid = 0;
  if (!ParseDigits(text, &pid) || pid <= 1 || kill(pid, SIGSTOP) != 0)
    return kvlane::Status::Backend("cannot stop " + TargetName(x.spec.peer) + " (pid " + text +
                                   ")");
  while (!IsStopped(pid)) {  // stopped once kill returned, but it takes the kernel a moment
    if (std::chrono::steady_clock::now() >= rig.deadline)
      return kvlane::Status::Timeout(TargetName(x.spec.peer) + " did not stop");
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  return kvlane::Status::Ok();
}

kvlane::Status FlipByteAt(BufferSpace& space, uint8_t* buf, uint64_t at) {
  uint8_t byte = 0;
  KVLANE_RETURN_IF_ERROR(space.Download(&byte, buf + at, 1));
  byte ^= 0x01;
  return space.Upload(buf + at, &byte, 1);
}

kvlane::Status FlipOneReceivedByte(SourceRig& rig, uint64_t epoch) {
  const SourceXfer& x = FaultXfer(rig);
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
