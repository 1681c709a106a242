// BlockTable: a seeded permutation of one group's pool slots. Request r of a burst
// takes the disjoint slice [r * descs, (r + 1) * descs). Deterministic and portable
// (splitmix64 + Fisher-Yates), so both ranks derive the same table from the seed.
// Plain value; thread-compatible.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace kvbench {

// splitmix64 finalizer: a bijective 64-bit mix.
uint64_t Mix64(uint64_t x);

// A splitmix64 stream; no std:: distributions (their output is not portable).
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t Next();
  // Uniform in [0, bound) by rejection. REQUIRES: bound > 0.
  uint64_t Below(uint64_t bound);

 private:
  uint64_t state_;
};

class BlockTable {
 public:
  // A permutation of [0, slots) derived from (seed, stream).
  BlockTable(uint64_t seed, uint64_t stream, uint64_t slots);

  uint64_t slots() const { return perm_.size(); }
  // Slots of request `request` when each request takes `descs` slots.
  // REQUIRES: (request + 1) * descs <= slots().
  std::span<const uint64_t> Slice(uint64_t request, uint64_t descs) const;

 private:
  std::vector<uint64_t> perm_;
};

}  // namespace kvbench
