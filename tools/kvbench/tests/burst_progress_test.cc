#include "burst_progress.h"

#include <gtest/gtest.h>

namespace kvbench {
namespace {

// With 1 warm-up and 4 timed bursts, the fifth burst read "timed burst 5/5" and the
// warm-up "timed burst 1/5": the warm-up is now counted apart.
TEST(BurstProgress, CountsWarmUpAndTimedBurstsApart) {
  EXPECT_EQ(BurstProgress(1, 1, 4, 0), "warm-up burst 1/1");
  EXPECT_EQ(BurstProgress(2, 1, 4, 2.0), "timed burst 1/4, about 8 s left in them");
  EXPECT_EQ(BurstProgress(5, 1, 4, 8.0), "timed burst 4/4, about 2 s left in them");
  EXPECT_EQ(BurstProgress(2, 2, 50, 3.0), "warm-up burst 2/2, about 153 s left in them");
}

TEST(BurstProgress, NoWarmUpCountsTimedBurstsOnly) {
  EXPECT_EQ(BurstProgress(1, 0, 50, 0), "timed burst 1/50");
  EXPECT_EQ(BurstProgress(12, 0, 50, 22.0), "timed burst 12/50, about 78 s left in them");
}

}  // namespace
}  // namespace kvbench
