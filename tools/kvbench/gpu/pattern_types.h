// Shared by host code and kvbench's pattern kernels: the POD table and result
// structs, and the per-thread work of fill, wipe and verify. The functions are
// compiled for both sides, so the host tests run exactly what the kernels run
// (tests/pattern_types_test.cc) against the host reference (pattern.h).
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define KVBENCH_HOST_DEVICE __host__ __device__
#else
#define KVBENCH_HOST_DEVICE
#endif

namespace kvbench::gpu {

// One contiguous range of a descriptor list. A launch takes a table of these in
// device memory and gives each entry one block.
struct PatternExtent {
  uint8_t* ptr;             // device memory: the bytes to fill, wipe or check
  uint64_t len;             // bytes
  uint64_t pattern_offset;  // source pool offset whose pattern byte ptr[0] carries
};

// The verify kernel's result, in device memory.
struct VerifyTotals {
  unsigned long long mismatches;  // bytes that differ from the pattern
  unsigned long long first;       // PackFirst(entry, byte) of the first one; kNoMismatch: none
};

inline constexpr unsigned long long kNoMismatch = ~0ull;
inline constexpr int kEntryShift = 40;  // a table entry's byte index fits below this bit
inline constexpr uint64_t kMaxEntries = 1ull << (64 - kEntryShift);
inline constexpr uint64_t kMaxEntryBytes = 1ull << kEntryShift;

// "First" is in table order, then byte order: what the host check reports.
KVBENCH_HOST_DEVICE inline unsigned long long PackFirst(uint64_t entry, uint64_t byte) {
  return (static_cast<unsigned long long>(entry) << kEntryShift) | byte;
}

// ---- The pattern (the same function as pattern.cc's, written again for the device).

KVBENCH_HOST_DEVICE inline uint64_t Mix(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Depends on (rank, epoch) only: computed once per launch.
KVBENCH_HOST_DEVICE inline uint64_t PatternKey(uint32_t rank, uint64_t epoch) {
  return Mix((uint64_t{rank} << 56) ^ Mix(epoch + 0x9e3779b97f4a7c15ull));
}

KVBENCH_HOST_DEVICE inline uint64_t KeyedWord(uint64_t key, uint64_t word) {
  return Mix(key ^ word);
}

// Words are little-endian: byte k of a word is bits [8k, 8k + 8).
KVBENCH_HOST_DEVICE inline uint8_t KeyedByte(uint64_t key, uint64_t offset) {
  return static_cast<uint8_t>(KeyedWord(key, offset / 8) >> (8 * (offset % 8)));
}

// ---- Per-thread work on one extent: thread t of n takes every n-th byte or word.

KVBENCH_HOST_DEVICE inline void StoreWord(uint8_t* p, uint64_t v) {
#if defined(__CUDA_ARCH__)
  *reinterpret_cast<uint64_t*>(p) = v;
#else
  std::memcpy(p, &v, 8);
#endif
}

KVBENCH_HOST_DEVICE inline uint64_t LoadWord(const uint8_t* p) {
#if defined(__CUDA_ARCH__)
  return *reinterpret_cast<const uint64_t*>(p);
#else
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
#endif
}

// An extent cut into an unaligned head, 8-byte words and a tail. Words are used
// only when a pattern word boundary falls on an 8-aligned address; otherwise the
// whole extent goes byte by byte (head = len).
struct ExtentSplit {
  uint64_t head;   // bytes before the first whole word
  uint64_t words;  // whole pattern words after the head
};

KVBENCH_HOST_DEVICE inline ExtentSplit Split(const PatternExtent& e) {
  uint64_t head = (8 - e.pattern_offset % 8) % 8;
  if (head > e.len) head = e.len;
  if ((reinterpret_cast<uintptr_t>(e.ptr) + head) % 8 != 0) return {e.len, 0};
  return {head, (e.len - head) / 8};
}

KVBENCH_HOST_DEVICE inline void FillRange(const PatternExtent& e, uint64_t key, uint64_t t,
                                          uint64_t n) {
  const ExtentSplit s = Split(e);
  const uint64_t tail = s.head + s.words * 8;
  for (uint64_t i = t; i < s.head; i += n) e.ptr[i] = KeyedByte(key, e.pattern_offset + i);
  const uint64_t word0 = (e.pattern_offset + s.head) / 8;
  for (uint64_t k = t; k < s.words; k += n) {
    StoreWord(e.ptr + s.head + 8 * k, KeyedWord(key, word0 + k));
  }
  for (uint64_t i = tail + t; i < e.len; i += n) e.ptr[i] = KeyedByte(key, e.pattern_offset + i);
}

KVBENCH_HOST_DEVICE inline void WipeRange(const PatternExtent& e, uint8_t byte, uint64_t t,
                                          uint64_t n) {
  const ExtentSplit s = Split(e);
  const uint64_t word = 0x0101010101010101ull * byte;
  for (uint64_t i = t; i < s.head; i += n) e.ptr[i] = byte;
  for (uint64_t k = t; k < s.words; k += n) StoreWord(e.ptr + s.head + 8 * k, word);
  for (uint64_t i = s.head + s.words * 8 + t; i < e.len; i += n) e.ptr[i] = byte;
}

// One thread's mismatches within an extent.
struct ThreadMismatches {
  uint64_t count = 0;
  uint64_t first = ~0ull;  // byte index in the extent; ~0: none

  KVBENCH_HOST_DEVICE void Add(uint64_t at, uint64_t bytes) {
    count += bytes;
    if (at < first) first = at;
  }
};

// Differing bytes of two words, and the index of the lowest one (x != 0).
KVBENCH_HOST_DEVICE inline uint64_t DifferingBytes(uint64_t x) {
  uint64_t bytes = 0;
  for (int b = 0; b < 8; ++b) bytes += ((x >> (8 * b)) & 0xff) != 0;
  return bytes;
}

KVBENCH_HOST_DEVICE inline uint64_t LowestDifferingByte(uint64_t x) {
#if defined(__CUDA_ARCH__)
  return static_cast<uint64_t>(__ffsll(static_cast<long long>(x)) - 1) / 8;
#else
  return static_cast<uint64_t>(__builtin_ctzll(x)) / 8;
#endif
}

KVBENCH_HOST_DEVICE inline ThreadMismatches VerifyRange(const PatternExtent& e, uint64_t key,
                                                        uint64_t t, uint64_t n) {
  ThreadMismatches m;
  const ExtentSplit s = Split(e);
  const uint64_t tail = s.head + s.words * 8;
  for (uint64_t i = t; i < s.head; i += n) {
    if (e.ptr[i] != KeyedByte(key, e.pattern_offset + i)) m.Add(i, 1);
  }
  const uint64_t word0 = (e.pattern_offset + s.head) / 8;
  for (uint64_t k = t; k < s.words; k += n) {
    const uint64_t x = LoadWord(e.ptr + s.head + 8 * k) ^ KeyedWord(key, word0 + k);
    if (x != 0) m.Add(s.head + 8 * k + LowestDifferingByte(x), DifferingBytes(x));
  }
  for (uint64_t i = tail + t; i < e.len; i += n) {
    if (e.ptr[i] != KeyedByte(key, e.pattern_offset + i)) m.Add(i, 1);
  }
  return m;
}

}  // namespace kvbench::gpu
