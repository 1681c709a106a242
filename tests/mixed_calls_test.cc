// The mixed-call run (mixed_calls.h) on the host transports.
#include "mixed_calls.h"

#include <gtest/gtest.h>

#include "two_agents.h"

namespace kvlane::test {
namespace {

class MixedCallsTest : public TwoAgents {
 protected:
  void SetUp() override { MakeAgents(MixedCallsOptions()); }
};

TEST_P(MixedCallsTest, RandomCallsFromSeveralThreadsKeepEveryByteRight) {
  MixTally n;
  RunMixedCalls(
      a(), b(), [](uint32_t, bool) { return std::make_unique<HostPages>(); }, n);
  if (n.failed) return;  // the failure said what went wrong
  // Every case was reached (a run of 1 s does each dozens of times).
  EXPECT_GT(n.ok, 0u);
  EXPECT_GT(n.canceled, 0u);
  EXPECT_GT(n.cancel_refused, 0u);
  EXPECT_GT(n.remade, 0u);
  EXPECT_GT(n.deregistered_in_flight, 0u);
  EXPECT_GT(n.remote_churn, 0u);
  EXPECT_GT(n.notifications, 0u);
}

INSTANTIATE_TEST_SUITE_P(Transports, MixedCallsTest, ::testing::Values("local", "shm", "tcp"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace kvlane::test
