#include "kvlane/status.h"

#include "kvlane/memory.h"
#include "kvlane/transfer.h"

namespace kvlane {

const char* CodeName(Code code) {
  switch (code) {
    case Code::kInProgress: return "in-progress";
    case Code::kOk: return "ok";
    case Code::kInvalidArgument: return "invalid-argument";
    case Code::kNotFound: return "not-found";
    case Code::kNotAllowed: return "not-allowed";
    case Code::kBackend: return "backend";
    case Code::kRemoteDisconnect: return "remote-disconnect";
    case Code::kRemoteStale: return "remote-stale";
    case Code::kCanceled: return "canceled";
    case Code::kTimeout: return "timeout";
    case Code::kNotSupported: return "not-supported";
  }
  return "unknown";
}

bool IsKnownCode(int32_t raw) { return raw >= -9 && raw <= 1; }

std::string Status::ToString() const {
  std::string s = CodeName(code_);
  if (!message_.empty()) s += ": " + message_;
  return s;
}

const char* MemoryKindName(MemoryKind kind) {
  return kind == MemoryKind::kCuda ? "cuda" : "host";
}

const char* AccessName(Access access) {
  return access == Access::kReadOnly ? "read-only" : "read-write";
}

const char* OpName(Op op) { return op == Op::kRead ? "read" : "write"; }

}  // namespace kvlane
