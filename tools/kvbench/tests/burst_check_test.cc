// The host verification steps stop partway when their StopCheck answers true
// (stop_check.h): it is asked once per kStopCheckBytes, between extents, and the
// step returns at that extent, the rest untouched.
#include "burst_check.h"

#include <gtest/gtest.h>

#include <vector>

namespace kvbench {
namespace {

constexpr uint64_t kExtent = kStopCheckBytes / 2;
constexpr int kExtents = 6;

// Six extents of half kStopCheckBytes each, back to back, one request.
PoolList SixHalves() {
  PoolList list;
  for (int i = 0; i < kExtents; ++i) list.extents.push_back({i * kExtent, kExtent});
  list.group_first = {0};
  return list;
}

RequestIndices All() {
  RequestIndices all(1);
  for (uint32_t i = 0; i < kExtents; ++i) all[0].push_back(i);
  return all;
}

TEST(BurstCheck, AWipeStopsAtTheFirstCheckThatSaysSo) {
  const PoolList list = SixHalves();
  std::vector<uint8_t> pool(kExtents * kExtent, 0);
  int asked = 0;
  WipeDestinations(pool.data(), list, All(), [&] { return ++asked == 2; });
  EXPECT_EQ(asked, 2);  // after extents 1 and 3: the step ends there
  for (int i = 0; i < kExtents; ++i) {
    EXPECT_EQ(pool[i * kExtent], i < 4 ? kSentinelByte : 0) << "extent " << i;
  }
}

TEST(BurstCheck, AVerifyStoppedPartwayCountsWhatItChecked) {
  const PoolList list = SixHalves();
  std::vector<uint8_t> pool(kExtents * kExtent, 0);
  FillSources(pool.data(), list, All(), 0, 7, [] { return false; });
  const VerifyResult whole = VerifyDestinations(pool.data(), list, All(), All(), 0, 7);
  EXPECT_TRUE(whole.ok());
  EXPECT_EQ(whole.checked, kExtents * kExtent);
  const VerifyResult part =
      VerifyDestinations(pool.data(), list, All(), All(), 0, 7, [] { return true; });
  EXPECT_EQ(part.checked, 2 * kExtent);
}

TEST(BurstCheck, NoStopCheckIsNeverAsked) {
  StopCheck none;
  StopPacer pacer(none);
  EXPECT_FALSE(pacer.Done(10 * kStopCheckBytes));
}

}  // namespace
}  // namespace kvbench
