// The cuda proxy's pure helpers (gpu/copy_types.h), which the host and the
// proxy kernel share; here on the CPU, so that CI runs them without a GPU:
// an entry's check against torn reads, the tagged hand-off words, and the
// hand-over's wait for an entry.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

#include "gpu/copy_types.h"
#include "gpu/proxy_ring_write.h"

namespace kvlane::gpu {
namespace {

ProxyEntry Entry(uint64_t n, uint64_t src, uint64_t dst, uint64_t len, uint32_t gen) {
  return test::ProxyEntryFor(n, kProxyCopy, gen, src, dst, len);
}

// The check the proxy makes (proxy_kernel.cu, CheckPart): the XOR of every
// word's term and the entry's `check` is the seed.
bool Passes(const ProxyEntry& e) {
  uint64_t w[8];
  std::memcpy(w, &e, sizeof(w));
  uint32_t c = e.check;
  for (uint32_t i = 0; i < 8; ++i) c ^= ProxyCheckTerm(w[i], i);
  return c == kProxyCheckSeed;
}

TEST(ProxyCheck, AWholeEntryPasses) {
  EXPECT_TRUE(Passes(Entry(5, 0x1000, 0x2000, 4096, 9)));
  EXPECT_TRUE(Passes(Entry(1023, 0, 1ull << 40, 1, 1)));
}

// A read torn between an entry and the one a ring lap earlier (only some
// 8-byte words new): every mix fails, even when the two differ by the same
// stride in source and destination.
TEST(ProxyCheck, EveryTornMixOfTwoEntriesFails) {
  const ProxyEntry older = Entry(7, 0x10000, 0x90000, 4096, 4);
  const ProxyEntry newer = Entry(7 + kProxyRing, 0x11000, 0x91000, 4096, 5);
  uint64_t a[8], b[8];
  std::memcpy(a, &older, sizeof(a));
  std::memcpy(b, &newer, sizeof(b));
  int mixes = 0;
  for (uint32_t mask = 1; mask < 255; ++mask) {  // words taken from the newer entry
    uint64_t w[8];
    for (int i = 0; i < 8; ++i) w[i] = (mask >> i & 1) ? b[i] : a[i];
    ProxyEntry torn;
    std::memcpy(&torn, w, sizeof(torn));
    if (std::memcmp(&torn, &older, sizeof(torn)) == 0 ||
        std::memcmp(&torn, &newer, sizeof(torn)) == 0)
      continue;  // the words that differ all came from one side
    ++mixes;
    EXPECT_FALSE(Passes(torn)) << "words from the newer entry: mask " << mask;
  }
  EXPECT_GT(mixes, 100);
}

TEST(PackTagged, RoundTripsAndKeepsTheLow16BitsOfTheGeneration) {
  const uint64_t w = PackTagged(0x12345, (1ull << 47) - 1, true);
  EXPECT_EQ(TaggedGen16(w), 0x2345u);
  EXPECT_EQ(TaggedCount(w), (1ull << 47) - 1);
  EXPECT_TRUE(TaggedFlag(w));
  const uint64_t z = PackTagged(1, 0, false);
  EXPECT_EQ(TaggedGen16(z), 1u);
  EXPECT_EQ(TaggedCount(z), 0u);
  EXPECT_FALSE(TaggedFlag(z));
}

// The first sighting stores now | 1 and never ends the wait, even when the
// coarse clock then reads one less than what was stored (an even `now`: the
// unsigned difference of session 9's first version ended the wait at once).
TEST(HandOverWaitOver, StartsAtTheFirstSightingAndEndsAfterTheWait) {
  constexpr int64_t kWait = 20000;
  uint64_t since = 0;
  EXPECT_FALSE(HandOverWaitOver(1000000, &since, kWait));
  EXPECT_EQ(since, 1000001u);
  EXPECT_FALSE(HandOverWaitOver(1000000, &since, kWait));  // the clock has not moved
  EXPECT_FALSE(HandOverWaitOver(1000001 + kWait, &since, kWait));
  EXPECT_TRUE(HandOverWaitOver(1000002 + kWait, &since, kWait));
  EXPECT_EQ(since, 1000001u);  // kept
}

TEST(HandOverWaitOver, AnOddFirstReadingIsKept) {
  uint64_t since = 0;
  EXPECT_FALSE(HandOverWaitOver(77, &since, 10));
  EXPECT_EQ(since, 77u);
  EXPECT_FALSE(HandOverWaitOver(87, &since, 10));
  EXPECT_TRUE(HandOverWaitOver(88, &since, 10));
}

}  // namespace
}  // namespace kvlane::gpu
