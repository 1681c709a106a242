#include "case_name.h"

#include <gtest/gtest.h>

namespace kvbench {
namespace {

TEST(CaseName, DefaultsNameWorkloadBlockAndPath) {
  EXPECT_EQ(DefaultCaseName({"kv-dsv4", 256, "", "shm", "", "", 0}), "kv-dsv4-b256-shm");
  EXPECT_EQ(DefaultCaseName({"kv-mla", 16, "bf16", "shm", "batch", "independent", 0}),
            "kv-mla-b16-shm");
}

// A kv-mla fp8 run used to replace a bf16 run's document (kv-mla-b16-shm.json both);
// likewise runs of either policy, or of another lane count.
TEST(CaseName, EverySettingOtherThanItsDefaultIsNamed) {
  EXPECT_EQ(DefaultCaseName({"kv-mla", 16, "fp8", "shm", "", "", 0}), "kv-mla-b16-fp8-shm");
  EXPECT_EQ(DefaultCaseName({"kv-dsv4", 256, "", "shm", "", "global-fifo", 0}),
            "kv-dsv4-b256-shm-global-fifo");
  EXPECT_EQ(DefaultCaseName({"kv-dsv4", 256, "", "shm", "", "", 4}), "kv-dsv4-b256-shm-lanes4");
  EXPECT_EQ(DefaultCaseName({"kv-mla", 16, "fp8", "tcp-cuda", "kernel", "global-fifo", 2}),
            "kv-mla-b16-fp8-tcp-cuda-kernel-global-fifo-lanes2");
}

// Base parts of a default run ("kv-dsv4-b256-shm") for the grid and ops parts to change.
CaseNameParts Dsv4Shm() { return {"kv-dsv4", 256, "", "shm", "", "", 0}; }

// The finding: a run with --grid full, --isl, --batches or --ops into the same --out
// as a default run replaced its document (kv-dsv4-b256-shm.json both).
TEST(CaseName, TheGridAndTheOpsAreNamed) {
  CaseNameParts p = Dsv4Shm();
  p.grid = "full";
  EXPECT_EQ(DefaultCaseName(p), "kv-dsv4-b256-shm-full");
  p = Dsv4Shm();
  p.isl = {8192, 32768};
  EXPECT_EQ(DefaultCaseName(p), "kv-dsv4-b256-shm-isl8k_32k");
  p = Dsv4Shm();
  p.batches = {1, 2};
  EXPECT_EQ(DefaultCaseName(p), "kv-dsv4-b256-shm-b1_2");
  p = Dsv4Shm();
  p.ops = {"pull"};
  EXPECT_EQ(DefaultCaseName(p), "kv-dsv4-b256-shm-pull");
  p = {"kv-mla", 16, "fp8", "tcp-cuda", "kernel", "global-fifo", 2};
  p.grid = "full";
  p.isl = {8192, 32768};
  p.batches = {1, 2, 4};
  p.ops = {"push"};
  EXPECT_EQ(DefaultCaseName(p),
            "kv-mla-b16-fp8-tcp-cuda-kernel-global-fifo-lanes2-full-isl8k_32k-b1_2_4-push");
}

// Existing names stay as they were: the defaults add nothing, whichever order --ops
// gives both ops in.
TEST(CaseName, TheDefaultGridAndOpsAddNothing) {
  CaseNameParts p = Dsv4Shm();
  p.grid = "quick";
  p.ops = {"pull", "push"};
  EXPECT_EQ(DefaultCaseName(p), "kv-dsv4-b256-shm");
  p.ops = {"push", "pull"};
  EXPECT_EQ(DefaultCaseName(p), "kv-dsv4-b256-shm");
  p.ops = {};
  EXPECT_EQ(DefaultCaseName(p), "kv-dsv4-b256-shm");
}

// A ladder names the values the plan measures, whatever the order or repeats given;
// one the preset measures too names nothing.
TEST(CaseName, ALadderIsNamedOnlyWhereItChangesThePresets) {
  const std::vector<uint64_t> quick_isl = {8192, 32768};
  EXPECT_EQ(ChangedLadder({}, quick_isl), std::vector<uint64_t>());
  EXPECT_EQ(ChangedLadder({8192, 32768}, quick_isl), std::vector<uint64_t>());
  EXPECT_EQ(ChangedLadder({32768, 8192, 8192}, quick_isl), std::vector<uint64_t>());
  EXPECT_EQ(ChangedLadder({8192}, quick_isl), std::vector<uint64_t>({8192}));
  EXPECT_EQ(ChangedLadder({4, 1, 2, 1}, {1, 2}), std::vector<uint64_t>({1, 2, 4}));
}

TEST(CaseName, LadderValuesAreCompact) {
  EXPECT_EQ(LadderLabel({8192, 131072}), "8k_128k");
  EXPECT_EQ(LadderLabel({1048576, 3145728, 1000, 1024, 1536}), "1000_1k_1536_1m_3m");
  EXPECT_EQ(LadderLabel({4, 2, 1, 2}), "1_2_4");
  EXPECT_EQ(LadderLabel({16777216}), "16m");
}

// `count` values from `first`, `step` apart.
std::vector<uint64_t> Range(uint64_t first, uint64_t count, uint64_t step = 1) {
  std::vector<uint64_t> v;
  for (uint64_t i = 0; i < count; ++i) v.push_back(first + i * step);
  return v;
}

// A long ladder is named by its ends, its length and a hash of the whole, so names
// stay short and ladders alike in their ends and length still differ.
TEST(CaseName, ALongLadderIsNamedByItsEndsAndAHash) {
  // "999_1000_..._1008": 48 characters, as it is; "1000_..._1009": 49, one past.
  EXPECT_EQ(LadderLabel(Range(999, 10)), "999_1000_1001_1002_1003_1004_1005_1006_1007_1008");
  EXPECT_EQ(LadderLabel(Range(1000, 10)), "1000-1009x10-0d8d3193");
  EXPECT_EQ(LadderLabel(Range(1000, 101)), "1000-1100x101-4fa6f14a");
  std::vector<uint64_t> a = Range(1000, 20, 2), b = a;
  b[10] = 1021;  // 1020 in a: the same ends and length
  EXPECT_EQ(LadderLabel(a), "1000-1038x20-2d9acb31");
  EXPECT_EQ(LadderLabel(b), "1000-1038x20-df266fec");
  CaseNameParts p = Dsv4Shm();
  p.isl = a;
  p.batches = b;
  EXPECT_EQ(DefaultCaseName(p), "kv-dsv4-b256-shm-isl1000-1038x20-2d9acb31-b1000-1038x20-df266fec");
}

}  // namespace
}  // namespace kvbench
