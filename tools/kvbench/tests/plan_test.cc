#include "plan.h"

#include <gtest/gtest.h>

#include "plan_report.h"

namespace kvbench {
namespace {

Workload Dsv4() { return Workload::Make({"kv-dsv4", 256, ""}).value(); }

const PlanPoint& At(const Plan& plan, uint64_t isl) {
  for (const PlanPoint& p : plan.points) {
    if (p.isl == isl) return p;
  }
  ADD_FAILURE() << "no point at isl " << isl;
  return plan.points.front();
}

TEST(Plan, DefaultsKeepTheWholeGridThatFits) {
  PlanOptions o;
  o.pool_budget = 1ull << 50;
  o.desc_budget = 1ull << 40;
  auto plan = BuildPlan(Dsv4(), o);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->Rows(), 24u);
  EXPECT_EQ(At(*plan, 524288).descs, 6146u);
}

// The rows a run measures, in its order: ISL, then batch, then op; shed batches are
// no rows.
TEST(Plan, PlannedRowsFollowTheRunsOrder) {
  PlanOptions o;
  o.isl = {32768, 8192};
  o.batches = {2, 1};
  auto plan = BuildPlan(Dsv4(), o);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  std::vector<RowKey> rows = PlannedRows(*plan, {"push", "pull"});
  const std::vector<RowKey> want = {{"push", 8192, 1},  {"pull", 8192, 1},  {"push", 8192, 2},
                                    {"pull", 8192, 2},  {"push", 32768, 1}, {"pull", 32768, 1},
                                    {"push", 32768, 2}, {"pull", 32768, 2}};
  EXPECT_EQ(rows, want);
  plan->points[0].batches = {1};  // as if batch 2 were shed at 8192
  EXPECT_EQ(PlannedRows(*plan, {"pull"}).size(), 3u);
}

TEST(Plan, DescriptorBudgetShedsButKeepsTheLadderFloor) {
  PlanOptions o;
  o.pool_budget = 1ull << 50;
  o.desc_budget = 100;  // smaller than a single 512k request
  auto plan = BuildPlan(Dsv4(), o);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(At(*plan, 524288).batches, (std::vector<uint64_t>{1, 2, 4, 8, 16}));
  ASSERT_EQ(At(*plan, 524288).shed.size(), 1u);
  EXPECT_EQ(At(*plan, 524288).shed[0].batch, 32u);
  EXPECT_EQ(At(*plan, 524288).shed[0].reason, "desc-budget");
}

TEST(Plan, DescriptorBudgetKeepsBatchesThatFit) {
  PlanOptions o;
  o.pool_budget = 1ull << 50;
  o.batches = {1, 2, 4, 8, 16, 32, 64};
  o.desc_budget = 64 * 98;  // 8k requests have 98 descriptors: everything fits
  auto plan = BuildPlan(Dsv4(), o);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(At(*plan, 8192).descs, 98u);
  EXPECT_EQ(At(*plan, 8192).batches.size(), 7u);
  EXPECT_EQ(At(*plan, 32768).batches.size(), 5u);  // 386 descriptors: 32 and 64 shed
}

TEST(Plan, PoolBudgetShedsTheLargestBatches) {
  PlanOptions o;  // 64 GiB
  o.desc_budget = 1ull << 40;
  auto plan = BuildPlan(Dsv4(), o);
  ASSERT_TRUE(plan.ok());
  EXPECT_LE(plan->layout.bytes, o.pool_budget);
  // A 512k request is ~2.95 GB: 16 fit in 64 GiB, 32 do not.
  EXPECT_EQ(At(*plan, 524288).batches.back(), 16u);
  EXPECT_EQ(At(*plan, 524288).shed.back().reason, "pool-budget");
  EXPECT_EQ(At(*plan, 8192).batches.back(), 32u);
}

TEST(Plan, PoolBudgetMayGoBelowTheFloor) {
  PlanOptions o;
  o.isl = {8192};
  o.pool_budget = 3 * Dsv4().RequestBytes(8192);
  auto plan = BuildPlan(Dsv4(), o);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->points[0].batches, (std::vector<uint64_t>{1, 2}));
}

TEST(Plan, FailsWhenNothingFits) {
  PlanOptions o;
  o.isl = {8192};
  o.pool_budget = 1 << 20;
  auto plan = BuildPlan(Dsv4(), o);
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("pool budget"), std::string::npos);
}

TEST(Plan, SharedPoolHoldsTheLargestPointPerGroup) {
  PlanOptions o;
  o.isl = {8192, 32768};
  o.batches = {1, 2, 4};
  auto plan = BuildPlan(Dsv4(), o);
  ASSERT_TRUE(plan.ok());
  const PoolLayout& l = plan->layout;
  ASSERT_EQ(l.groups.size(), 4u);
  EXPECT_EQ(l.groups[0].bytes, 4u * 128 * 1123200);   // c4a: batch 4 x 128 blocks at 32k
  EXPECT_EQ(l.groups[3].bytes, 4u * 2 * 61 * 37440);  // swa: 2 blocks at either ISL
  uint64_t sum = 0;
  for (const Piece& p : l.pieces) sum += p.bytes;
  EXPECT_LE(sum, l.bytes);
}

TEST(Plan, PiecesAreCutBetweenDescriptors) {
  PlanOptions o;
  o.isl = {524288};
  o.batches = {8};
  auto plan = BuildPlan(Dsv4(), o);
  ASSERT_TRUE(plan.ok());
  for (const GroupLayout& g : plan->layout.groups) {
    EXPECT_LE(g.piece_bytes, 4 * kGiB);
    EXPECT_EQ(g.piece_bytes % g.desc_bytes, 0u) << g.name;
  }
  for (const Piece& p : plan->layout.pieces) EXPECT_LE(p.bytes, 4 * kGiB);
  EXPECT_GT(plan->layout.pieces.size(), 4u);  // c4a alone is ~18 GB
}

TEST(Plan, ContigPoolPacksWholeRequestsIntoPieces) {
  auto w = Workload::Make({"contig", 256, ""}).value();
  PlanOptions o;
  o.isl = {524288};
  o.batches = {3};
  auto plan = BuildPlan(w, o);
  ASSERT_TRUE(plan.ok());
  const GroupLayout& g = plan->layout.groups[0];
  uint64_t req = w.RequestBytes(524288);  // ~2.95 GB: one per 4 GiB piece
  EXPECT_EQ(g.Slots(req), 3u);
  for (uint64_t s = 0; s < 3; ++s) {
    uint64_t at = g.SlotOffset(req, s) - g.offset;
    EXPECT_LE(at % g.piece_bytes + req, g.piece_bytes);
  }
}

TEST(Plan, RejectsEmptyLadders) {
  PlanOptions o;
  o.isl = {};
  EXPECT_FALSE(BuildPlan(Dsv4(), o).ok());
}

// The plan (and so the document's workload) records a dtype only where it was
// used: kv-mla's element type.
TEST(Plan, RecordsTheDtypeOfKvMlaOnly) {
  Plan dsv4 = BuildPlan(Dsv4(), PlanOptions{}).value();
  EXPECT_FALSE(PlanToJson(dsv4)["workload"].contains("dtype"));
  PlanOptions small;
  small.isl = {8192};
  Plan mla = BuildPlan(Workload::Make({"kv-mla", 16, "fp8"}).value(), small).value();
  EXPECT_EQ(PlanToJson(mla)["workload"]["dtype"], "fp8");
}

}  // namespace
}  // namespace kvbench
