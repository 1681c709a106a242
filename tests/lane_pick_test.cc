// LeastLoadedLane (core/lane_pick.h), the lane choice of a post that is not
// striped: fewest queued bytes first; among those, the previous post's lane;
// else the first from the rotation on.
#include "core/lane_pick.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace kvlane::core {
namespace {

int Pick(const std::vector<uint64_t>& bytes, uint32_t rotation, int last) {
  return LeastLoadedLane(static_cast<int>(bytes.size()), rotation, last,
                         [&](int i) { return bytes.at(static_cast<size_t>(i)); });
}

TEST(LeastLoadedLane, IdleLanesGoRoundWithoutAPreviousLane) {
  const std::vector<uint64_t> idle(4, 0);
  for (uint32_t rotation = 0; rotation < 8; ++rotation)
    EXPECT_EQ(Pick(idle, rotation, -1), static_cast<int>(rotation % 4));
}

TEST(LeastLoadedLane, IdleLanesKeepThePreviousLane) {
  const std::vector<uint64_t> idle(4, 0);
  for (uint32_t rotation = 0; rotation < 8; ++rotation) EXPECT_EQ(Pick(idle, rotation, 2), 2);
}

TEST(LeastLoadedLane, ThePreviousLaneLosesToALessLoadedOne) {
  // Lane 1 moves a bulk copy: a small post that used it last goes elsewhere.
  EXPECT_EQ(Pick({0, 2 << 20, 0, 0}, 0, 1), 0);
  EXPECT_EQ(Pick({0, 2 << 20, 0, 0}, 2, 1), 2);
  EXPECT_EQ(Pick({4096, 2 << 20, 512, 8192}, 0, 1), 2);
}

TEST(LeastLoadedLane, ThePreviousLaneWinsATieAtTheMinimum) {
  EXPECT_EQ(Pick({512, 1 << 20, 512, 512}, 0, 3), 3);
  EXPECT_EQ(Pick({512, 1 << 20, 512, 512}, 1, 0), 0);
}

TEST(LeastLoadedLane, WithoutATieTheLeastLoadedWins) {
  EXPECT_EQ(Pick({300, 100, 200}, 0, -1), 1);
  EXPECT_EQ(Pick({300, 100, 200}, 2, 0), 1);
}

TEST(LeastLoadedLane, APreviousLaneOutOfRangeIsIgnored) {
  // A slot reused for a channel with fewer lanes than the last one had.
  EXPECT_EQ(Pick({0, 0}, 1, 5), 1);
  EXPECT_EQ(Pick({0, 0}, 0, -1), 0);
}

TEST(LeastLoadedLane, OneLaneIsAlwaysLaneZero) {
  EXPECT_EQ(Pick({1 << 30}, 7, -1), 0);
  EXPECT_EQ(Pick({1 << 30}, 7, 0), 0);
}

}  // namespace
}  // namespace kvlane::core
