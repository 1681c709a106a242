// Payload pattern: every 8-byte word of a source is Mix(rank, epoch, offset / 8),
// with `offset` the byte offset from the source pool's base, so any landed byte can
// be checked from where it came from. Pure functions; thread-safe.
#pragma once

#include <cstdint>

namespace kvbench {

inline constexpr uint8_t kSentinelByte = 0xA5;

// A row's second pattern, for its last timed burst (checked as its first burst
// is): the row's epoch with the top bit set. Row epochs count rows from 1 and
// never reach that bit, so the two patterns of a row, and those of any two rows,
// differ: stale bytes of an earlier burst never pass for a later one.
inline constexpr uint64_t kLastBurstEpochBit = uint64_t{1} << 63;
inline constexpr uint64_t LastBurstEpoch(uint64_t row_epoch) {
  return row_epoch | kLastBurstEpochBit;
}
inline constexpr bool IsLastBurstEpoch(uint64_t epoch) { return (epoch & kLastBurstEpochBit) != 0; }

// The pattern word at word index `word` of a source owned by `rank` in `epoch`.
uint64_t PatternWord(uint32_t rank, uint64_t epoch, uint64_t word);

// Writes the pattern for source offsets [src_offset, src_offset + len) into dst.
void FillPattern(uint8_t* dst, uint64_t len, uint64_t src_offset, uint32_t rank, uint64_t epoch);

// Wipes [dst, dst + len) with kSentinelByte.
void WipeSentinel(uint8_t* dst, uint64_t len);

// Outcome of checking landed bytes. Accumulates over many ranges.
struct VerifyResult {
  uint64_t checked = 0;         // bytes compared
  uint64_t mismatches = 0;      // bytes that differ
  int64_t first_mismatch = -1;  // destination offset of the first differing byte; -1: none

  bool ok() const { return mismatches == 0; }
  // Folds `other`, whose offsets are relative to `dst_offset`, into this one.
  void Merge(const VerifyResult& other, uint64_t dst_offset);
};

// Checks that data[0, len) holds the pattern of source offsets [src_offset, +len).
// Offsets in the result are relative to `data`.
VerifyResult VerifyPattern(const uint8_t* data, uint64_t len, uint64_t src_offset, uint32_t rank,
                           uint64_t epoch);

}  // namespace kvbench
