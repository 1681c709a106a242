#include "grid_flags.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace kvbench {
namespace {

TEST(GridFlags, ParseBytes) {
  EXPECT_EQ(ParseBytes("1024").value(), 1024u);
  EXPECT_EQ(ParseBytes("64GiB").value(), 64ull << 30);
  EXPECT_EQ(ParseBytes("64G").value(), 64ull << 30);
  EXPECT_EQ(ParseBytes("512MiB").value(), 512ull << 20);
  EXPECT_FALSE(ParseBytes("").ok());
  EXPECT_FALSE(ParseBytes("GiB").ok());
  EXPECT_FALSE(ParseBytes("12Q").ok());
  EXPECT_FALSE(ParseBytes("99999999999T").ok());
}

TEST(GridFlags, FlagBeatsEnvBeatsDefault) {
  GridFlags flags;
  ::setenv("KVBENCH_POOL_BUDGET", "1GiB", 1);
  ::setenv("KVBENCH_DESC_BUDGET", "777", 1);
  PlanOptions o = ResolvePlanOptions(flags, PlanOptions{}).value();
  EXPECT_EQ(o.pool_budget, 1ull << 30);
  EXPECT_EQ(o.desc_budget, 777u);
  flags.pool_budget = "2GiB";
  EXPECT_EQ(ResolvePlanOptions(flags, PlanOptions{}).value().pool_budget, 2ull << 30);
  ::unsetenv("KVBENCH_POOL_BUDGET");
  ::unsetenv("KVBENCH_DESC_BUDGET");
  flags.pool_budget.clear();
  EXPECT_EQ(ResolvePlanOptions(flags, PlanOptions{}).value().pool_budget, 64ull << 30);
}

TEST(GridFlags, PlanFromFlagsFailsClosedOnBadBlock) {
  GridFlags flags;
  flags.workload.block = 192;
  auto plan = PlanFromFlags(flags, PlanOptions{});
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("HCA"), std::string::npos);
}

}  // namespace
}  // namespace kvbench
