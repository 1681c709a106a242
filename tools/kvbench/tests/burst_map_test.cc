#include "burst_map.h"

#include <gtest/gtest.h>

#include <cstring>
#include <set>

#include "burst_check.h"
#include "plan.h"

namespace kvbench {
namespace {

struct Fixture {
  Plan plan;
  PoolList list;
};

Fixture Make(uint64_t isl, uint64_t batch) {
  Workload w = Workload::Make({"kv-dsv4", 256, ""}).value();
  PlanOptions o;
  o.isl = {isl};
  o.batches = {batch};
  Plan plan = BuildPlan(w, o).value();
  PoolList list = MakePoolList(plan.layout, plan.points[0].demand);
  return {plan, list};
}

TEST(BurstMap, RequestsTakeDisjointBlocksOnEachSide) {
  Fixture f = Make(8192, 4);
  BurstMap m = MakeBurstMap(f.list, f.plan.points[0].demand, 4, 99);
  for (const auto* side : {&m.target, &m.initiator}) {
    std::set<uint32_t> seen;
    for (const auto& req : *side) {
      EXPECT_EQ(req.size(), 98u);
      for (uint32_t i : req) EXPECT_TRUE(seen.insert(i).second);
    }
  }
  EXPECT_EQ(m.burst_bytes, 4 * f.plan.points[0].req_bytes);
}

TEST(BurstMap, PairsHaveEqualLengthsAndStayInsideThePool) {
  Fixture f = Make(32768, 2);
  BurstMap m = MakeBurstMap(f.list, f.plan.points[0].demand, 2, 5);
  for (size_t r = 0; r < 2; ++r) {
    for (size_t k = 0; k < m.target[r].size(); ++k) {
      const Extent& t = f.list.extents[m.target[r][k]];
      const Extent& i = f.list.extents[m.initiator[r][k]];
      EXPECT_EQ(t.len, i.len);
      EXPECT_LE(t.offset + t.len, f.plan.layout.bytes);
    }
  }
}

TEST(BurstMap, SameSeedSameMap) {
  Fixture f = Make(8192, 2);
  BurstMap a = MakeBurstMap(f.list, f.plan.points[0].demand, 2, 7);
  BurstMap b = MakeBurstMap(f.list, f.plan.points[0].demand, 2, 7);
  EXPECT_EQ(a.target, b.target);
  EXPECT_EQ(a.initiator, b.initiator);
}

// A simulated pull inside one process: copy target extents to initiator extents.
TEST(BurstCheck, SimulatedTransferVerifiesAndACorruptByteFails) {
  Fixture f = Make(8192, 2);
  BurstMap m = MakeBurstMap(f.list, f.plan.points[0].demand, 2, 1);
  std::vector<uint8_t> src(f.plan.layout.bytes), dst(f.plan.layout.bytes);
  FillSources(src.data(), f.list, m.target, 0, 42);
  WipeDestinations(dst.data(), f.list, m.initiator);
  EXPECT_FALSE(VerifyDestinations(dst.data(), f.list, m.initiator, m.target, 0, 42).ok());
  for (size_t r = 0; r < 2; ++r) {
    for (size_t k = 0; k < m.target[r].size(); ++k) {
      const Extent& s = f.list.extents[m.target[r][k]];
      const Extent& d = f.list.extents[m.initiator[r][k]];
      std::memcpy(dst.data() + d.offset, src.data() + s.offset, s.len);
    }
  }
  VerifyResult ok = VerifyDestinations(dst.data(), f.list, m.initiator, m.target, 0, 42);
  EXPECT_TRUE(ok.ok());
  EXPECT_EQ(ok.checked, m.burst_bytes);
  uint64_t victim = f.list.extents[m.initiator[1][5]].offset + 17;
  dst[victim] ^= 0x80;
  VerifyResult bad = VerifyDestinations(dst.data(), f.list, m.initiator, m.target, 0, 42);
  EXPECT_EQ(bad.mismatches, 1u);
  EXPECT_EQ(bad.first_mismatch, static_cast<int64_t>(victim));
}

}  // namespace
}  // namespace kvbench
