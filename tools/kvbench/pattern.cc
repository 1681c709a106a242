#include "pattern.h"

#include <bit>
#include <cstring>

#include "block_table.h"

namespace kvbench {
namespace {

static_assert(std::endian::native == std::endian::little, "pattern words are little-endian");

uint8_t PatternByte(uint32_t rank, uint64_t epoch, uint64_t offset) {
  return static_cast<uint8_t>(PatternWord(rank, epoch, offset / 8) >> (8 * (offset % 8)));
}

// Bytes before the next word boundary of the source offset, capped at len.
uint64_t HeadBytes(uint64_t src_offset, uint64_t len) {
  uint64_t head = (8 - src_offset % 8) % 8;
  return head < len ? head : len;
}

}  // namespace

uint64_t PatternWord(uint32_t rank, uint64_t epoch, uint64_t word) {
  uint64_t key = Mix64((uint64_t{rank} << 56) ^ Mix64(epoch + 0x9e3779b97f4a7c15ull));
  return Mix64(key ^ word);
}

void FillPattern(uint8_t* dst, uint64_t len, uint64_t src_offset, uint32_t rank, uint64_t epoch) {
  uint64_t i = 0;
  for (uint64_t head = HeadBytes(src_offset, len); i < head; ++i) {
    dst[i] = PatternByte(rank, epoch, src_offset + i);
  }
  for (; i + 8 <= len; i += 8) {
    uint64_t w = PatternWord(rank, epoch, (src_offset + i) / 8);
    std::memcpy(dst + i, &w, 8);
  }
  for (; i < len; ++i) dst[i] = PatternByte(rank, epoch, src_offset + i);
}

void WipeSentinel(uint8_t* dst, uint64_t len) { std::memset(dst, kSentinelByte, len); }

void VerifyResult::Merge(const VerifyResult& other, uint64_t dst_offset) {
  if (first_mismatch < 0 && other.first_mismatch >= 0) {
    first_mismatch = static_cast<int64_t>(dst_offset) + other.first_mismatch;
  }
  checked += other.checked;
  mismatches += other.mismatches;
}

VerifyResult VerifyPattern(const uint8_t* data, uint64_t len, uint64_t src_offset, uint32_t rank,
                           uint64_t epoch) {
  VerifyResult r;
  r.checked = len;
  auto check_byte = [&](uint64_t i) {
    if (data[i] == PatternByte(rank, epoch, src_offset + i)) return;
    if (r.first_mismatch < 0) r.first_mismatch = static_cast<int64_t>(i);
    ++r.mismatches;
  };
  uint64_t i = 0;
  for (uint64_t head = HeadBytes(src_offset, len); i < head; ++i) check_byte(i);
  for (; i + 8 <= len; i += 8) {
    uint64_t got;
    std::memcpy(&got, data + i, 8);
    if (got == PatternWord(rank, epoch, (src_offset + i) / 8)) continue;
    for (uint64_t k = i; k < i + 8; ++k) check_byte(k);
  }
  for (; i < len; ++i) check_byte(i);
  return r;
}

}  // namespace kvbench
