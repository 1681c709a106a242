#include "block_table.h"

#include <cassert>
#include <numeric>
#include <utility>

namespace kvbench {

uint64_t Mix64(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t SplitMix64::Next() {
  state_ += 0x9e3779b97f4a7c15ull;
  return Mix64(state_);
}

uint64_t SplitMix64::Below(uint64_t bound) {
  assert(bound > 0);
  uint64_t limit = UINT64_MAX - UINT64_MAX % bound;  // reject the biased tail
  uint64_t x = Next();
  while (x >= limit) x = Next();
  return x % bound;
}

BlockTable::BlockTable(uint64_t seed, uint64_t stream, uint64_t slots) : perm_(slots) {
  std::iota(perm_.begin(), perm_.end(), uint64_t{0});
  SplitMix64 rng(Mix64(seed) ^ Mix64(stream + 0x5eed));
  for (uint64_t i = slots; i > 1; --i) {
    std::swap(perm_[i - 1], perm_[rng.Below(i)]);
  }
}

std::span<const uint64_t> BlockTable::Slice(uint64_t request, uint64_t descs) const {
  assert((request + 1) * descs <= perm_.size());
  return std::span<const uint64_t>(perm_).subspan(request * descs, descs);
}

}  // namespace kvbench
