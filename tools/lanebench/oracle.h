// The oracle every measured payload is checked against. A payload sent by rank
// `source` in iteration `epoch` for slot `slot` holds the epoch marker
// (little-endian u64) in its first 8 bytes; every later byte at offset o is
// byte (o % 8) of Mix(source, epoch, slot, o / 8), so the source, the epoch, where
// the payload belongs and the offset within it all show.
#pragma once

#include <cstdint>

namespace lanebench {

inline constexpr uint64_t kMarkerBytes = 8;

// Where a payload belongs: byte `offset` of target process `target`'s buffer
// (XferSpec's peer and remote_offset; a target knows its own index and is told
// the offset). Two transfers of one iteration never share a slot, so a transfer
// that reads or writes another one's place, or another target's, does not verify.
struct Slot {
  uint32_t target = 0;
  uint64_t offset = 0;
};

// REQUIRES: n >= kMarkerBytes.
void FillPayload(uint8_t* p, uint64_t n, uint32_t source, uint64_t epoch, Slot slot);
// Offset of the first byte that differs from the oracle, or -1.
int64_t FirstMismatch(const uint8_t* p, uint64_t n, uint32_t source, uint64_t epoch, Slot slot);

}  // namespace lanebench
