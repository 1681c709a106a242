// The cuda channel's judgement of a local piece (transport/cuda/local_span.h):
// which bytes it asks the driver about, and what it concludes. The driver is
// replaced by a map of which addresses are this GPU's memory, so CI runs it
// without a GPU.
#include "transport/cuda/local_span.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <span>
#include <unordered_set>
#include <utility>
#include <vector>

namespace kvlane::core {
namespace {

// A driver whose answer is "this GPU's" except for the ranges in `off` (another
// device's allocation, or host memory, mapped into the piece's VMM range);
// records every question asked.
struct FakeDriver {
  std::vector<std::pair<uint64_t, uint64_t>> off;  // [from, to)
  std::vector<std::pair<uint64_t, uint64_t>> asked;
  bool operator()(uint64_t from, uint64_t n) {
    asked.emplace_back(from, n);
    for (const auto& [lo, hi] : off)
      if (from < hi && lo < from + n) return false;
    return true;
  }
};

TEST(LocalSpan, AsksOnlyAboutBytesNoEarlierSegmentCovered) {
  FakeDriver d;
  LocalSpan s(0x4000, true);
  EXPECT_TRUE(s.Cover(0x4000, 0x100, std::ref(d)));
  EXPECT_TRUE(s.Cover(0x4000, 0x100, std::ref(d)));  // the same segment again
  EXPECT_TRUE(s.Cover(0x4080, 0x40, std::ref(d)));   // inside the span
  EXPECT_TRUE(s.Cover(0x5000, 0x100, std::ref(d)));  // past it: the gap too
  EXPECT_TRUE(s.Cover(0x2000, 0x10, std::ref(d)));   // before it: the gap too
  const std::vector<std::pair<uint64_t, uint64_t>> want = {
      {0x4000, 0x100}, {0x4100, 0x5100 - 0x4100}, {0x2000, 0x4000 - 0x2000}};
  EXPECT_EQ(d.asked, want);
  EXPECT_EQ(s.lo(), 0x2000u);
  EXPECT_EQ(s.hi(), 0x5100u);
}

// The piece's first byte is this GPU's, a later one is not: a segment reaching
// it makes the piece off this GPU (a system-scope fence), for good. (Judging the
// first address seen, as the channel did before, said "on this GPU".)
TEST(LocalSpan, ASegmentReachingAnotherDevicesBytesTurnsThePieceOff) {
  FakeDriver d{.off = {{0x6000, 0x9000}}};
  LocalSpan s(0x1000, true);
  EXPECT_TRUE(s.Cover(0x1000, 0x1000, std::ref(d)));
  EXPECT_FALSE(s.Cover(0x5ff0, 0x20, std::ref(d)));
  const size_t asked = d.asked.size();
  EXPECT_FALSE(s.Cover(0x1000, 0x10, std::ref(d)));  // on-device bytes: still off
  EXPECT_EQ(d.asked.size(), asked);                  // and nothing more is asked
}

// A segment below the span is judged with the gap up to it, and one past it
// with the gap from it: both lie in the piece, so a table's hull is judged
// whole.
TEST(LocalSpan, TheGapsBetweenSegmentsAreJudgedToo) {
  FakeDriver d{.off = {{0x3000, 0x9000}}};  // [.., 0x3000) this GPU's; the rest not
  LocalSpan s(0x2800, true);
  EXPECT_TRUE(s.Cover(0x2800, 0x100, std::ref(d)));
  EXPECT_TRUE(s.Cover(0x1000, 0x10, std::ref(d)));   // gap [0x1000, 0x2800): this GPU's
  EXPECT_FALSE(s.Cover(0x3000, 0x10, std::ref(d)));  // gap [0x2900, 0x3010) is not
  const std::vector<std::pair<uint64_t, uint64_t>> want = {
      {0x2800, 0x100}, {0x1000, 0x1800}, {0x2900, 0x710}};
  EXPECT_EQ(d.asked, want);
}

// A piece first seen as host memory or another GPU's is never asked about, on
// either side of where it was first seen.
TEST(LocalSpan, APieceOffThisGpuAtFirstAsksNothing) {
  FakeDriver d;
  LocalSpan s(0x2000, false);
  EXPECT_FALSE(s.Cover(0x2000, 0x100, std::ref(d)));
  EXPECT_FALSE(s.Cover(0x8000, 0x100, std::ref(d)));
  EXPECT_FALSE(s.Cover(0x1000, 0x100, std::ref(d)));
  EXPECT_TRUE(d.asked.empty());
}

// Once off, a segment below the span (whose bytes the driver calls this GPU's)
// does not turn the piece back on.
TEST(LocalSpan, APieceTurnedOffStaysOffBelowTheSpan) {
  FakeDriver d{.off = {{0x5000, 0x6000}}};
  LocalSpan s(0x4000, true);
  EXPECT_FALSE(s.Cover(0x4000, 0x1800, std::ref(d)));
  EXPECT_FALSE(s.Cover(0x1000, 0x100, std::ref(d)));  // [0x1000, 0x4000) is this GPU's
  EXPECT_FALSE(s.Cover(0x4000, 0x100, std::ref(d)));
}

// A segment reaching past both ends of the span, with the bytes below it off and
// those above on: off, whatever the order of the two questions.
TEST(LocalSpan, ASegmentPastBothEndsIsOffWhenEitherSideIs) {
  for (const auto& off : {std::pair<uint64_t, uint64_t>{0x1000, 0x2000},
                          std::pair<uint64_t, uint64_t>{0x5000, 0x6000}}) {
    FakeDriver d{.off = {off}};
    LocalSpan s(0x3000, true);
    EXPECT_TRUE(s.Cover(0x3000, 0x100, std::ref(d)));
    EXPECT_FALSE(s.Cover(0x1000, 0x5000, std::ref(d))) << std::hex << off.first;
    EXPECT_FALSE(s.Cover(0x3000, 0x10, std::ref(d))) << std::hex << off.first;
  }
}

// A channel that sees many registration cycles keeps no more than about twice
// the pieces still registered: a new piece past the sweep mark drops every
// deregistered one, and the live ones keep what was judged of them.
TEST(LocalSpans, DeregisteredPiecesAreSweptAsNewOnesCome) {
  LocalSpans spans;
  std::unordered_set<uint64_t> registered;
  int asked = 0;
  auto is_registered = [&](std::span<const uint64_t> keys) {
    std::vector<bool> live;
    for (uint64_t k : keys) {
      live.push_back(registered.contains(k));
      ++asked;
    }
    return live;
  };
  FakeDriver d{.off = {{0x1000, 0x2000}}};
  registered.insert(1);
  spans.Add(1, LocalSpan(0x800, true), is_registered);
  EXPECT_FALSE(spans.Find(1)->Cover(0x800, 0x1000, std::ref(d)));  // judged off
  for (uint64_t key = 2; key < 100000; ++key) {                    // register, use once, deregister
    registered.insert(key);
    ASSERT_EQ(spans.Find(key), nullptr);
    spans.Add(key, LocalSpan(key << 20, true), is_registered);
    registered.erase(key);
    ASSERT_LE(spans.size(), LocalSpans::kMinSweepMark + 1) << key;
  }
  EXPECT_LT(asked, 2 * 100000);  // amortized: each entry is asked about about once
  ASSERT_NE(spans.Find(1), nullptr);
  EXPECT_FALSE(spans.Find(1)->Cover(0x800, 0x10, std::ref(d)));  // still off
}

// Many live pieces are all kept: the mark grows with them, and a sweep drops
// only the deregistered.
TEST(LocalSpans, LivePiecesAreNeverSwept) {
  LocalSpans spans;
  std::unordered_set<uint64_t> registered;
  auto is_registered = [&](std::span<const uint64_t> keys) {
    std::vector<bool> live;
    for (uint64_t k : keys) live.push_back(registered.contains(k));
    return live;
  };
  for (uint64_t key = 1; key <= 5000; ++key) {
    registered.insert(key);
    spans.Add(key, LocalSpan(key << 20, true), is_registered);
    if (key % 2 == 0) registered.erase(key);  // every other one deregistered
  }
  for (uint64_t key = 1; key <= 5000; key += 2) ASSERT_NE(spans.Find(key), nullptr) << key;
  EXPECT_LT(spans.size(), 5000u);  // some deregistered ones are gone
  EXPECT_GE(spans.size(), 2500u);
}

}  // namespace
}  // namespace kvlane::core
