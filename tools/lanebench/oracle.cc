#include "oracle.h"

#include <bit>
#include <cstring>

namespace lanebench {

static_assert(std::endian::native == std::endian::little, "the oracle assumes little-endian words");

namespace {

uint64_t Mix64(uint64_t x) {  // splitmix64 finalizer
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint64_t Word(uint64_t seed, uint64_t index) { return Mix64(seed + index * 0x9E3779B97F4A7C15ull); }

uint64_t Seed(uint32_t source, uint64_t epoch, Slot slot) {
  const uint64_t where = Mix64(Mix64(slot.offset + 1) ^ (uint64_t{slot.target} << 32));
  return Mix64((uint64_t{source} << 48) ^ Mix64(epoch + 1) ^ where);
}

// Byte o of the oracle payload (o >= kMarkerBytes).
uint8_t OracleByte(uint64_t seed, uint64_t o) {
  return static_cast<uint8_t>(Word(seed, o / 8) >> (8 * (o % 8)));
}

}  // namespace

void FillPayload(uint8_t* p, uint64_t n, uint32_t source, uint64_t epoch, Slot slot) {
  const uint64_t seed = Seed(source, epoch, slot);
  uint64_t o = kMarkerBytes;
  for (; o + 8 <= n; o += 8) {
    uint64_t w = Word(seed, o / 8);
    std::memcpy(p + o, &w, 8);  // little-endian host: byte k of w lands at o + k
  }
  for (; o < n; ++o) p[o] = OracleByte(seed, o);
  std::memcpy(p, &epoch, kMarkerBytes);
}

int64_t FirstMismatch(const uint8_t* p, uint64_t n, uint32_t source, uint64_t epoch, Slot slot) {
  uint64_t marker = 0;
  std::memcpy(&marker, p, kMarkerBytes);
  if (marker != epoch) return 0;
  const uint64_t seed = Seed(source, epoch, slot);
  uint64_t o = kMarkerBytes;
  for (; o + 8 <= n; o += 8) {
    uint64_t w = Word(seed, o / 8), got = 0;
    std::memcpy(&got, p + o, 8);
    if (got != w) break;
  }
  for (; o < n; ++o)
    if (p[o] != OracleByte(seed, o)) return static_cast<int64_t>(o);
  return -1;
}

}  // namespace lanebench
