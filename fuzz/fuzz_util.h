// Shared by the fuzz targets and the seed generator: the fixed target identity
// the frame fuzzer checks against, and how its input is laid out.
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
// Segment keys with this value are replaced by the registry's (random) key, so
// that the fuzzer can reach the bounds check.
inline constexpr uint64_t kLiveKey = 0x4b4b4b4b4b4b4b4bull;

inline core::Secret FixedSecret() {
  core::Secret s{};
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<uint8_t>(0xa0 + i);
  return s;
}

template <typename T>
void Append(std::string* out, const T& v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof(T));
}

}  // namespace kvlane::fuzz
