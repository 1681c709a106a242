// Helpers shared by the engine tests: agent pairs on a chosen transport and
// byte patterns that mix a seed with the offset.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kvlane/kvlane.h"

namespace kvlane::test {

// Options for an agent that may use only `transport`.
AgentOptions OptionsFor(const std::string& name, const std::string& transport);

// Two agents in this process that loaded each other's metadata.
struct Pair {
  std::unique_ptr<Agent> a, b;
};
Pair MakePair(const std::string& transport, AgentOptions base = {});

// Deterministic bytes for (seed, offset).
uint8_t PatternByte(uint64_t seed, uint64_t offset);
void Fill(std::vector<uint8_t>& buf, uint64_t seed);
// Index of the first byte that differs from the pattern, or -1.
int64_t FirstMismatch(const uint8_t* p, uint64_t n, uint64_t seed, uint64_t base_offset = 0);

}  // namespace kvlane::test
