// Backoff: Pause() yields kYields times before its first nap, so a wait that is
// a race with another thread's next instructions sleeps no timer (StreamChannel's
// wait for a reply that beat its sender's cursor, with AgentOptions::spin 0);
// past them every Pause() sleeps, so a wait that lasts keeps no CPU busy.
#include "core/backoff.h"

#include <gtest/gtest.h>

namespace kvlane::core {
namespace {

TEST(Backoff, PauseYieldsBeforeItNaps) {
  Backoff b;
  for (uint32_t i = 0; i < Backoff::kYields; ++i) b.Pause();
  EXPECT_EQ(b.naps(), 0u) << "a pause within the first kYields slept";
  b.Pause();
  EXPECT_EQ(b.naps(), 1u);
  for (int i = 0; i < 10; ++i) b.Pause();
  EXPECT_EQ(b.naps(), 11u) << "past its yields, every pause sleeps";
}

TEST(Backoff, NapAlwaysSleeps) {
  Backoff b;
  b.Nap();
  b.Nap();
  EXPECT_EQ(b.naps(), 2u);
}

}  // namespace
}  // namespace kvlane::core
