// The pattern kernels on a real GPU (CTest label `gpu`; scripts/gpu-check.sh):
// fill is byte-identical to the host reference, wipe and fill touch nothing
// outside their extents, and verify catches a single flipped byte at the right
// pool offset. Self-checking: every device result is read back and compared on
// the host. Fails (does not skip) without a GPU.
#include <gtest/gtest.h>

#include <vector>

#include "device_check.h"
#include "device_memory.h"
#include "pool_ops.h"

namespace kvbench {
namespace {

// A device pool of `bytes`, zeroed, freed at the end of the test.
class GpuPattern : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_GT(DeviceCount(), 0) << "a gpu-labelled test: run it where a GPU is visible";
  }
  void TearDown() override { DeviceFree(pool_.base); }

  void Allocate(uint64_t bytes) {
    auto p = DeviceAlloc(0, bytes);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    pool_ = {static_cast<uint8_t*>(p.value()), kvlane::MemoryKind::kCuda, 0};
    bytes_ = bytes;
    ASSERT_TRUE(DeviceMemset(pool_.base, 0, bytes).ok());
  }

  std::vector<uint8_t> ReadBack() {
    std::vector<uint8_t> host(bytes_);
    EXPECT_TRUE(CopyFromDevice(host.data(), pool_.base, bytes_).ok());
    return host;
  }

  PoolView pool_;
  uint64_t bytes_ = 0;
};

// Extents of awkward sizes and alignments, one cut into several table pieces.
PoolList AwkwardList() {
  PoolList list;
  uint64_t at = 0;
  for (uint64_t len : std::initializer_list<uint64_t>{
           3, 8, 13, 4096, 4099, 3 * kTablePieceBytes + 77, 64, 1 << 20, 1123200}) {
    list.extents.push_back({at, len});
    at += len + 5;  // gaps: later extents sit off 8-byte alignment, and must stay zero
  }
  return list;
}

uint64_t End(const PoolList& list) { return list.extents.back().offset + list.extents.back().len; }

TEST_F(GpuPattern, FillIsByteIdenticalToHostAndStaysInsideExtents) {
  PoolList list = AwkwardList();
  Allocate(End(list) + 4096);
  RequestIndices sources = {{0, 1, 2, 3, 4}, {5, 6, 7, 8}};
  ASSERT_TRUE(FillSources(pool_, list, sources, 1, 77).ok());
  std::vector<uint8_t> want(bytes_, 0);
  FillSources(want.data(), list, sources, 1, 77);
  EXPECT_TRUE(ReadBack() == want);
}

TEST_F(GpuPattern, WordsOffTheirAlignmentGoByteByByte) {
  Allocate(1 << 20);
  // ptr 8-aligned + 3 while the pattern offset is 8-aligned: no whole words.
  PatternTable table = {{pool_.base + 3, 100000, 4096}, {pool_.base + 200003, 77, 5}};
  ASSERT_TRUE(DeviceFill(0, table, 0, 3).ok());
  std::vector<uint8_t> want(bytes_, 0);
  FillPattern(want.data() + 3, 100000, 4096, 0, 3);
  FillPattern(want.data() + 200003, 77, 5, 0, 3);
  EXPECT_TRUE(ReadBack() == want);
  auto totals = DeviceVerify(0, table, 0, 3);
  ASSERT_TRUE(totals.ok()) << totals.status().ToString();
  EXPECT_EQ(totals->mismatches, 0u);
}

TEST_F(GpuPattern, WipeWritesTheSentinelOnlyInsideExtents) {
  PoolList list = AwkwardList();
  Allocate(End(list) + 4096);
  RequestIndices some = {{1, 5}, {7}};
  ASSERT_TRUE(WipeDestinations(pool_, list, some).ok());
  std::vector<uint8_t> want(bytes_, 0);
  WipeDestinations(want.data(), list, some);
  EXPECT_TRUE(ReadBack() == want);
}

TEST_F(GpuPattern, VerifyPassesThenCatchesOneFlippedByte) {
  PoolList list = AwkwardList();
  Allocate(End(list) + 4096);
  // Destinations 7 and 3 hold the pattern of sources 8 and 4 (trimmed to equal lengths).
  RequestIndices dst = {{7, 3}}, src = {{8, 4}};
  list.extents[8].len = list.extents[7].len;
  list.extents[4].len = list.extents[3].len;
  std::vector<uint8_t> host(bytes_, 0);
  for (size_t k = 0; k < dst[0].size(); ++k) {
    const Extent& d = list.extents[dst[0][k]];
    FillPattern(host.data() + d.offset, d.len, list.extents[src[0][k]].offset, 1, 5);
  }
  ASSERT_TRUE(CopyToDevice(pool_.base, host.data(), bytes_).ok());
  auto clean = VerifyDestinations(pool_, list, dst, src, 1, 5);
  ASSERT_TRUE(clean.ok()) << clean.status().ToString();
  EXPECT_TRUE(clean->ok());
  EXPECT_EQ(clean->checked, list.extents[7].len + list.extents[3].len);

  const Extent& d = list.extents[7];
  for (uint64_t at :
       {d.offset, d.offset + d.len / 2, d.offset + d.len - 1, list.extents[3].offset + 4095}) {
    uint8_t byte = host[at] ^ 0x01;
    ASSERT_TRUE(CopyToDevice(pool_.base + at, &byte, 1).ok());
    auto v = VerifyDestinations(pool_, list, dst, src, 1, 5);
    ASSERT_TRUE(v.ok());
    EXPECT_EQ(v->mismatches, 1u) << at;
    EXPECT_EQ(v->first_mismatch, static_cast<int64_t>(at));
    ASSERT_TRUE(CopyToDevice(pool_.base + at, &host[at], 1).ok());
  }
  auto stale = VerifyDestinations(pool_, list, dst, src, 1, 6);  // another epoch
  ASSERT_TRUE(stale.ok());
  EXPECT_GT(stale->mismatches, stale->checked / 2);
  EXPECT_GE(stale->first_mismatch, static_cast<int64_t>(d.offset));  // within the first word
  EXPECT_LT(stale->first_mismatch, static_cast<int64_t>(d.offset + 8));
}

TEST_F(GpuPattern, FlipOneLandedByteIsCaughtThroughPoolOps) {
  PoolList list = AwkwardList();
  Allocate(End(list) + 4096);
  RequestIndices dst = {{6}};                             // 64 B
  ASSERT_TRUE(FillSources(pool_, list, dst, 0, 1).ok());  // lands its own offset's pattern
  ASSERT_TRUE(FlipOneLandedByte(pool_, list, dst).ok());
  auto v = VerifyDestinations(pool_, list, dst, dst, 0, 1);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->mismatches, 1u);
  EXPECT_EQ(v->first_mismatch, static_cast<int64_t>(list.extents[6].offset + 32));
}

TEST_F(GpuPattern, SentinelFailsEveryByteAndManyEntriesReduce) {
  // More entries than blocks in one launch: blocks loop and reuse their shared memory.
  const uint64_t entries = 70000, len = 24;
  Allocate(entries * len);
  PatternTable table;
  for (uint64_t i = 0; i < entries; ++i) table.push_back({pool_.base + i * len, len, i * len});
  ASSERT_TRUE(DeviceWipe(0, table, kSentinelByte).ok());
  auto wiped = DeviceVerify(0, table, 0, 1);
  ASSERT_TRUE(wiped.ok());
  VerifyResult w = ToVerifyResult(wiped.value(), table, pool_.base);
  EXPECT_GT(w.mismatches, entries * len - entries * len / 64);
  EXPECT_GE(w.first_mismatch, 0);  // within the first word
  EXPECT_LT(w.first_mismatch, 8);
  ASSERT_TRUE(DeviceFill(0, table, 0, 1).ok());
  uint8_t byte = 0;
  uint64_t at = 69999 * len + 7;
  ASSERT_TRUE(CopyFromDevice(&byte, pool_.base + at, 1).ok());
  byte ^= 0x80;
  ASSERT_TRUE(CopyToDevice(pool_.base + at, &byte, 1).ok());
  VerifyResult v = ToVerifyResult(DeviceVerify(0, table, 0, 1).value(), table, pool_.base);
  EXPECT_EQ(v.mismatches, 1u);
  EXPECT_EQ(v.first_mismatch, static_cast<int64_t>(at));
  EXPECT_EQ(v.checked, entries * len);
}

}  // namespace
}  // namespace kvbench
