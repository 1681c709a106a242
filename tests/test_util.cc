#include "test_util.h"

#include <gtest/gtest.h>

namespace kvlane::test {

AgentOptions OptionsFor(const std::string& name, const std::string& transport) {
  AgentOptions o;
  o.name = name;
  o.transports = {transport};
  return o;
}

Pair MakePair(const std::string& transport, AgentOptions base) {
  Pair p;
  base.transports = {transport};
  base.name = "a";
  auto a = Agent::Create(base);
  base.name = "b";
  auto b = Agent::Create(base);
  EXPECT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_TRUE(b.ok()) << b.status().ToString();
  p.a = std::move(a).value();
  p.b = std::move(b).value();
  return p;
}

uint8_t PatternByte(uint64_t seed, uint64_t offset) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + offset;
  x ^= x >> 29;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 32;
  return static_cast<uint8_t>(x);
}

void Fill(std::vector<uint8_t>& buf, uint64_t seed) {
  for (uint64_t i = 0; i < buf.size(); ++i) buf[i] = PatternByte(seed, i);
}

int64_t FirstMismatch(const uint8_t* p, uint64_t n, uint64_t seed, uint64_t base_offset) {
  for (uint64_t i = 0; i < n; ++i)
    if (p[i] != PatternByte(seed, base_offset + i)) return static_cast<int64_t>(i);
  return -1;
}

}  // namespace kvlane::test
