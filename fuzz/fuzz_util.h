// Shared by the fuzz targets and the seed generator: the fixed target identity
// the frame fuzzer checks against, and how its input is laid out:
//   [mode byte][StreamHello][name bytes][frames...]
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

#include "core/metadata.h"
#include "transport/stream/wire.h"

namespace kvlane::fuzz {

inline constexpr uint64_t kAgentId = 0x1122334455667788ull;
inline constexpr uint64_t kRegionBase = 0x7f0000000000ull;  // registered, never dereferenced
inline constexpr uint64_t kRegionLen = 1 << 20;
// Registered read-only, right after the read-write region: a WRITE must never
// be accepted into it.
inline constexpr uint64_t kReadOnlyBase = kRegionBase + kRegionLen;
// Segment keys with this value are replaced by the registry's (random) key, so
// that the fuzzer can reach the bounds check.
inline constexpr uint64_t kLiveKey = 0x4b4b4b4b4b4b4b4bull;

inline core::Secret FixedSecret() {
  core::Secret s{};
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<uint8_t>(0xa0 + i);
  return s;
}

// The challenge nonce of the fuzzed connection.
inline core::Nonce ServerNonce() {
  core::Nonce n;
  for (size_t i = 0; i < n.size(); ++i) n[i] = static_cast<uint8_t>(0x30 + i);
  return n;
}

// First input byte of frame_fuzz: when set, the target signs the Hello itself
// (as a real initiator holding the secret would), so that mutated inputs still
// reach the frame checks; when clear, the proof is checked as given.
inline constexpr uint8_t kSignHello = 1;

template <typename T>
void Append(std::string* out, const T& v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof(T));
}

}  // namespace kvlane::fuzz
