// Status codes that arrive from a peer (reply headers, control frames): an
// untrusted int32 that names one of our error codes, or nothing we know.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "kvlane/status.h"

namespace kvlane::core {

// The error code `raw` names, or nullopt when it is not a known error code
// (ok and in-progress are not errors a peer may report).
inline std::optional<Code> PeerErrorCode(int32_t raw) {
  if (!IsKnownCode(raw) || raw >= 0) return std::nullopt;
  return static_cast<Code>(raw);
}

// The error a peer reported as `raw` (not zero), with `what` as its message;
// a code we do not know is a protocol error.
inline Status PeerStatus(int32_t raw, const std::string& what) {
  const std::optional<Code> code = PeerErrorCode(raw);
  return code ? Status(*code, what) : Status::Backend("protocol: bad status");
}

}  // namespace kvlane::core
