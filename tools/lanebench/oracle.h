// The oracle every measured payload is checked against. A payload sent by rank
// `source` in iteration `epoch` holds the epoch marker (little-endian u64) in its
// first 8 bytes; every later byte at offset o is byte (o % 8) of
// Mix(source, epoch, o / 8), so the source, the epoch and the offset all show.
#pragma once

#include <cstdint>

namespace lanebench {

inline constexpr uint64_t kMarkerBytes = 8;

// REQUIRES: n >= kMarkerBytes.
void FillPayload(uint8_t* p, uint64_t n, uint32_t source, uint64_t epoch);
// Offset of the first byte that differs from the oracle, or -1.
int64_t FirstMismatch(const uint8_t* p, uint64_t n, uint32_t source, uint64_t epoch);

}  // namespace lanebench
