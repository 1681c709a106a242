// The plan's cases and the order its runs go in.
#include "plan.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace lanebench {
namespace {

std::vector<std::string> Ids(const std::vector<Case>& cases) {
  std::vector<std::string> ids;
  for (const Case& c : cases) ids.push_back(c.id);
  return ids;
}

BenchConfig Config() {
  BenchConfig cfg;
  cfg.pin = "off";
  return cfg;
}

// The isolation control of the mixed case (the same op, the small size) comes right
// after it, wherever --single-ops and --single-bytes list it.
TEST(Plan, TheIsolationControlFollowsTheMixedCase) {
  BenchConfig cfg = Config();
  EXPECT_EQ(Ids(BuildCases(cfg)),
            (std::vector<std::string>{"mixed-write", "single-write-4KiB", "single-read-4KiB",
                                      "single-read-2MiB", "single-write-2MiB"}));
  cfg.mixed_op = "read";
  cfg.small_bytes = 2u << 20;
  EXPECT_EQ(Ids(BuildCases(cfg)),
            (std::vector<std::string>{"mixed-read", "single-read-2MiB", "single-read-4KiB",
                                      "single-write-4KiB", "single-write-2MiB"}));
  cfg.small_bytes = 8192;  // no control: the order as given
  EXPECT_EQ(Ids(BuildCases(cfg)),
            (std::vector<std::string>{"mixed-read", "single-read-4KiB", "single-read-2MiB",
                                      "single-write-4KiB", "single-write-2MiB"}));
  cfg.shape = "single";
  cfg.small_bytes = 4096;
  EXPECT_EQ(Ids(BuildCases(cfg)).front(), "single-read-4KiB") << "no mixed case to follow";
  EXPECT_EQ(IsolationControlId(cfg), "single-read-4KiB");
  EXPECT_EQ(MixedId(cfg), "mixed-read");
}

// Pair by pair: every case of a pair, each in both arms back to back, before the
// next pair; arm order rotating by pair. The mixed case and its control used to
// run a whole shape apart (every pair of the mixed case first).
TEST(Plan, RunsGoPairByPairWithBothArmsOfACaseBackToBack) {
  BenchConfig cfg = Config();
  cfg.pairs = 2;
  const std::vector<PlannedRun> order = RunOrder(cfg, 3);
  ASSERT_EQ(order.size(), PlannedRuns(cfg, 3));
  std::vector<std::string> got;
  for (const PlannedRun& r : order)
    got.push_back(std::to_string(r.pair) + ":" + std::to_string(r.case_index) + ":" + r.arm + ":" +
                  std::to_string(r.position));
  EXPECT_EQ(got, (std::vector<std::string>{
                     "0:0:global-fifo:0", "0:0:independent:1", "0:1:global-fifo:0",
                     "0:1:independent:1", "0:2:global-fifo:0", "0:2:independent:1",
                     "1:0:independent:0", "1:0:global-fifo:1", "1:1:independent:0",
                     "1:1:global-fifo:1", "1:2:independent:0", "1:2:global-fifo:1"}));
}

}  // namespace
}  // namespace lanebench
