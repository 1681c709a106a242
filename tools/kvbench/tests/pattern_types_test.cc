// The pattern kernels' per-thread work (gpu/pattern_types.h), run on the host
// the way the kernels run it (one block per table entry, every thread of it),
// against the host reference (pattern.h).
#include "gpu/pattern_types.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "device_table.h"
#include "pattern.h"

namespace kvbench {
namespace {

using gpu::PatternExtent;

void EmulateFill(const PatternTable& table, uint64_t key, uint64_t threads) {
  for (const PatternExtent& e : table) {
    for (uint64_t t = 0; t < threads; ++t) gpu::FillRange(e, key, t, threads);
  }
}

gpu::VerifyTotals EmulateVerify(const PatternTable& table, uint64_t key, uint64_t threads) {
  gpu::VerifyTotals totals{0, gpu::kNoMismatch};
  for (uint64_t i = 0; i < table.size(); ++i) {
    gpu::ThreadMismatches block;
    for (uint64_t t = 0; t < threads; ++t) {
      gpu::ThreadMismatches m = gpu::VerifyRange(table[i], key, t, threads);
      if (m.count > 0) block.Add(m.first, m.count);
    }
    if (block.count == 0) continue;
    totals.mismatches += block.count;
    totals.first = std::min(totals.first, gpu::PackFirst(i, block.first));
  }
  return totals;
}

// A pool list with extents of awkward sizes: tiny, odd, one split into pieces.
PoolList AwkwardList() {
  PoolList list;
  uint64_t at = 0;
  for (uint64_t len :
       std::initializer_list<uint64_t>{3, 8, 13, 4096, 4099, kTablePieceBytes + 77, 64}) {
    list.extents.push_back({at, len});
    at += len + 5;  // gaps keep later extents off 8-byte alignment
  }
  return list;
}

uint64_t ListBytes(const PoolList& list) {
  return list.extents.back().offset + list.extents.back().len + 64;
}

TEST(PatternTypes, WordMatchesHostReference) {
  for (uint32_t rank : {0u, 1u, 255u}) {
    for (uint64_t epoch : {0ull, 1ull, 1234567ull}) {
      uint64_t key = gpu::PatternKey(rank, epoch);
      for (uint64_t word : {0ull, 1ull, 99ull, 1ull << 40}) {
        EXPECT_EQ(gpu::KeyedWord(key, word), PatternWord(rank, epoch, word));
      }
    }
  }
}

TEST(PatternTypes, FillIsByteIdenticalToHostFill) {
  PoolList list = AwkwardList();
  RequestIndices all = {{0, 1, 2, 3}, {4, 5, 6}};
  for (uint64_t shift : {0, 3}) {  // 3: pattern words no longer fall on 8-aligned addresses
    for (uint64_t threads : {1, 7, 32, 256}) {
      std::vector<uint8_t> got(ListBytes(list) + 8, 0), want(got.size(), 0);
      uint8_t* base = got.data() + shift;
      EmulateFill(MakePatternTable(base, list, all, nullptr), gpu::PatternKey(1, 42), threads);
      FillSources(want.data() + shift, list, all, 1, 42);
      EXPECT_EQ(got, want) << "threads " << threads << " shift " << shift;
    }
  }
}

TEST(PatternTypes, WipeWritesOnlyTheExtents) {
  PoolList list = AwkwardList();
  RequestIndices some = {{1, 5}};
  std::vector<uint8_t> got(ListBytes(list), 0), want(got.size(), 0);
  PatternTable table = MakePatternTable(got.data(), list, some, nullptr);
  for (const PatternExtent& e : table) {
    for (uint64_t t = 0; t < 32; ++t) gpu::WipeRange(e, kSentinelByte, t, 32);
  }
  WipeDestinations(want.data(), list, some);
  EXPECT_EQ(got, want);
}

TEST(PatternTypes, VerifyAgreesWithHostOnFlippedBytes) {
  PoolList list = AwkwardList();
  RequestIndices dst = {{0, 3, 5}}, src = {{2, 4, 6}};
  std::vector<uint8_t> pool(ListBytes(list), 0);
  // Land the pattern of each source extent in its paired destination.
  for (size_t k = 0; k < dst[0].size(); ++k) {
    const Extent& d = list.extents[dst[0][k]];
    FillPattern(pool.data() + d.offset, d.len, list.extents[src[0][k]].offset, 0, 9);
  }
  PatternTable table = MakePatternTable(pool.data(), list, dst, &src);
  VerifyResult clean =
      ToVerifyResult(EmulateVerify(table, gpu::PatternKey(0, 9), 32), table, pool.data());
  EXPECT_TRUE(clean.ok());
  EXPECT_EQ(clean.checked, 3 + 4096 + kTablePieceBytes + 77);
  for (uint64_t at : {list.extents[0].offset + 2, list.extents[3].offset + 4095,
                      list.extents[5].offset + kTablePieceBytes + 3}) {
    pool[at] ^= 0x10;
    VerifyResult v =
        ToVerifyResult(EmulateVerify(table, gpu::PatternKey(0, 9), 256), table, pool.data());
    VerifyResult host = VerifyDestinations(pool.data(), list, dst, src, 0, 9);
    EXPECT_EQ(v.mismatches, 1u) << at;
    EXPECT_EQ(v.first_mismatch, static_cast<int64_t>(at));
    EXPECT_EQ(v.mismatches, host.mismatches);
    EXPECT_EQ(v.first_mismatch, host.first_mismatch);
    pool[at] ^= 0x10;
  }
  VerifyResult stale =
      ToVerifyResult(EmulateVerify(table, gpu::PatternKey(0, 10), 7), table, pool.data());
  VerifyResult host = VerifyDestinations(pool.data(), list, dst, src, 0, 10);
  EXPECT_EQ(stale.mismatches, host.mismatches);
  EXPECT_EQ(stale.first_mismatch, host.first_mismatch);
}

TEST(DeviceTable, CutsExtentsIntoPiecesInOrder) {
  PoolList list;
  list.extents = {{0, 10}, {4096, 2 * kTablePieceBytes + 1}};
  RequestIndices dst = {{1}, {0}}, src = {{0}, {1}};
  uint8_t* base = reinterpret_cast<uint8_t*>(uint64_t{1} << 20);
  PatternTable t = MakePatternTable(base, list, dst, &src);
  ASSERT_EQ(t.size(), 4u);
  EXPECT_EQ(t[0].ptr, base + 4096);
  EXPECT_EQ(t[0].pattern_offset, 0u);
  EXPECT_EQ(t[1].ptr, base + 4096 + kTablePieceBytes);
  EXPECT_EQ(t[1].pattern_offset, kTablePieceBytes);
  EXPECT_EQ(t[2].len, 1u);
  EXPECT_EQ(t[3].ptr, base);
  EXPECT_EQ(t[3].pattern_offset, 4096u);
  gpu::VerifyTotals totals{2, gpu::PackFirst(1, 5)};
  VerifyResult v = ToVerifyResult(totals, t, base);
  EXPECT_EQ(v.first_mismatch, static_cast<int64_t>(4096 + kTablePieceBytes + 5));
  EXPECT_EQ(v.checked, 10 + 2 * kTablePieceBytes + 1);
}

}  // namespace
}  // namespace kvbench
