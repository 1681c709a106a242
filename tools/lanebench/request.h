// The source's requests to a target ("fill|verify|flip <epoch> <source-rank>
// <offset> <len>"), parsed as untrusted input: the target acts on one only when
// every number is plain decimal digits that fit their type and the range lies
// inside its buffer. Pure logic; thread-safe.
#pragma once

#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>

#include "kvlane/status.h"

namespace lanebench {

struct TargetRequest {
  std::string cmd;  // "fill", "verify" or "flip"
  uint64_t epoch = 0;
  uint32_t src = 0;  // the source's rank
  uint64_t off = 0;  // into the target's buffer
  uint64_t len = 0;
};

// Exactly five fields separated by single spaces; `cmd` one of the three; len at
// least kMarkerBytes (oracle.h) and [off, off + len) inside a buffer of
// `buffer_bytes` (no sum that wraps). kInvalidArgument naming what is wrong but
// quoting no peer text.
kvlane::Result<TargetRequest> ParseRequest(std::string_view message, uint64_t buffer_bytes);

// All of `text` as plain decimal digits fitting T (no sign, space or rest): a
// number one lanebench process wrote for another (a request, an address file).
template <typename T>
bool ParseDigits(std::string_view text, T* out) {
  if (text.empty() || text.front() < '0' || text.front() > '9') return false;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && end == text.data() + text.size();
}

}  // namespace lanebench
