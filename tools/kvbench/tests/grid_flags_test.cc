#include "grid_flags.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "host_memory.h"

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

// --desc-budget counts descriptors, as --isl and --batches count tokens and requests:
// a plain number. A unit suffix (bytes, for --pool-budget) is refused, naming the flag
// or the variable it came from, rather than read as a multiplier.
TEST(GridFlags, TheDescriptorBudgetIsAPlainCount) {
  ::unsetenv("KVBENCH_DESC_BUDGET");
  GridFlags flags;
  flags.desc_budget = "65536";
  EXPECT_EQ(ResolvePlanOptions(flags, PlanOptions{}).value().desc_budget, 65536u);
  for (const char* text : {"64K", "64KiB", "1M", "100B", "", "-5", "1e6", "99999999999999999999"}) {
    flags.desc_budget = text;
    if (flags.desc_budget.empty()) continue;  // empty: the default
    auto o = ResolvePlanOptions(flags, PlanOptions{});
    ASSERT_FALSE(o.ok()) << text;
    EXPECT_EQ(o.status().code(), kvlane::Code::kInvalidArgument);
    EXPECT_NE(o.status().message().find("--desc-budget '" + std::string(text) +
                                        "' is a descriptor count"),
              std::string::npos)
        << o.status().message();
  }
  flags.desc_budget.clear();
  ::setenv("KVBENCH_DESC_BUDGET", "64K", 1);
  auto o = ResolvePlanOptions(flags, PlanOptions{});
  ::unsetenv("KVBENCH_DESC_BUDGET");
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.status().message().find("KVBENCH_DESC_BUDGET '64K'"), std::string::npos)
      << o.status().message();
}

TEST(GridFlags, PlanFromFlagsFailsClosedOnBadBlock) {
  GridFlags flags;
  flags.workload.block = 192;
  auto plan = PlanFromFlags(flags, PlanOptions{});
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("HCA"), std::string::npos);
}

// `plan` and `run` start from the same grid and budget (ApplyGridDefaults): the
// quick preset, and 64 GiB capped at a quarter of the host memory bound
// (MemAvailable, or a cgroup's headroom where smaller) unless given.
TEST(GridFlags, DefaultsAreTheQuickGridAndTheHostBudget) {
  ::unsetenv("KVBENCH_POOL_BUDGET");
  GridFlags flags;
  PlanOptions defaults;
  ASSERT_TRUE(ApplyGridDefaults(&flags, &defaults).value());  // automatic
  EXPECT_EQ(defaults.isl, (std::vector<uint64_t>{8192, 32768}));
  EXPECT_EQ(defaults.batches, (std::vector<uint64_t>{1, 2, 4}));
  const uint64_t budget = std::stoull(flags.pool_budget);
  EXPECT_LE(budget, 64ull << 30);
  const uint64_t quarter = ReadHostMemory().Bytes() / 4;
  if (quarter > 0 && quarter < (60ull << 30)) {  // MemAvailable moves a little between reads
    EXPECT_NEAR(double(budget), double(quarter), 0.1 * quarter);
  }
  GridFlags full;
  full.preset = "full";
  full.pool_budget = "2GiB";
  ASSERT_FALSE(ApplyGridDefaults(&full, &defaults).value());  // given: kept
  EXPECT_EQ(full.pool_budget, "2GiB");
  EXPECT_EQ(defaults.isl.size(), 4u);
  EXPECT_EQ(defaults.batches.back(), 32u);
  GridFlags bad;
  bad.preset = "huge";
  EXPECT_FALSE(ApplyGridDefaults(&bad, &defaults).ok());
}

// The finding: a cgroup with no room left reads as a bound of 1 B (known); a quarter of
// it was 0, which means unknown, and the automatic budget became the uncapped 64 GiB.
TEST(GridFlags, AHostWithNoRoomCapsTheBudgetAtOneByte) {
  constexpr uint64_t k64GiB = 64ull << 30;
  EXPECT_EQ(HostPoolBudget(k64GiB, 1), 1u);
  EXPECT_EQ(HostPoolBudget(k64GiB, 3), 1u);
  EXPECT_EQ(HostPoolBudget(k64GiB, 8), 2u);
  EXPECT_EQ(HostPoolBudget(k64GiB, 8ull << 30), 2ull << 30);
  EXPECT_EQ(HostPoolBudget(k64GiB, 1ull << 40), k64GiB);
  EXPECT_EQ(HostPoolBudget(k64GiB, 0), k64GiB);  // unknown: the default
}

// An empty KVBENCH_POOL_BUDGET is unset: the budget is the automatic one (capped
// by MemAvailable), not the 64 GiB default it used to fall back to. A bad value
// names where it came from.
TEST(GridFlags, AnEmptyPoolBudgetVariableIsUnset) {
  ::setenv("KVBENCH_POOL_BUDGET", "", 1);
  GridFlags flags;
  PlanOptions defaults;
  EXPECT_TRUE(ApplyGridDefaults(&flags, &defaults).value());  // automatic
  EXPECT_FALSE(flags.pool_budget.empty());
  ::setenv("KVBENCH_POOL_BUDGET", "1x", 1);
  GridFlags env;
  auto r = ResolvePlanOptions(env, defaults);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message().rfind("KVBENCH_POOL_BUDGET: ", 0), 0u) << r.status().message();
  GridFlags flag;
  flag.pool_budget = "64gib";
  r = ResolvePlanOptions(flag, defaults);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message().rfind("--pool-budget: ", 0), 0u) << r.status().message();
  ::unsetenv("KVBENCH_POOL_BUDGET");
}

}  // namespace
}  // namespace kvbench
