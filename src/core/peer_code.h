// Status codes that arrive from a peer (reply headers, control frames): an
// untrusted int32 that names one of our error codes, or nothing we know.
#pragma once

#include <cstdint>
#include <optional>

#include "kvlane/status.h"

namespace kvlane::core {

// The error code `raw` names, or nullopt when it is not a known error code
// (ok and in-progress are not errors a peer may report).
inline std::optional<Code> PeerErrorCode(int32_t raw) {
  if (!IsKnownCode(raw) || raw >= 0) return std::nullopt;
  return static_cast<Code>(raw);
}

}  // namespace kvlane::core
