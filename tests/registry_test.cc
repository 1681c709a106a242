// Registry::Add cuts a region into pieces of at most piece_bytes: as many as
// (len - 1) / piece_bytes + 1, back to back from the region's start to its end,
// however close the region's end and piece_bytes come to 2^64. Registering only
// books the range (nothing is read or mapped), so these regions are never there.
#include "core/registry.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "kvlane/options.h"

namespace kvlane::core {
namespace {

constexpr uint64_t kAddr = 4096;
constexpr uint64_t kLen = ~uint64_t{0} - 2 * 4096 + 1;  // ends at 2^64 - 4096: no wrap

// Whether Add returns within a few seconds, tried in a child process first: it
// used to step an offset by piece_bytes until it passed the region's end, and
// the step past the last piece wrapped below it, so the loop never ended (the
// child's alarm ends it instead of the test hanging and growing its tables).
void ExpectAddReturns(uint64_t piece) {
  ASSERT_EXIT(
      {
        alarm(5);
        Registry r(piece);
        std::_Exit(r.Add(kAddr, kLen, MemoryKind::kHost, 0).ok() ? 0 : 1);
      },
      testing::ExitedWithCode(0), "")
      << "piece_bytes " << piece;
}

// The region [kAddr, kAddr + kLen) in pieces of `piece` bytes: `want` of them,
// back to back, each at most `piece` bytes, the last ending where the region does.
void ExpectCut(uint64_t piece, size_t want) {
  SCOPED_TRACE("piece_bytes " + std::to_string(piece));
  ASSERT_NO_FATAL_FAILURE(ExpectAddReturns(piece));
  Registry r(piece);
  ASSERT_TRUE(r.Add(kAddr, kLen, MemoryKind::kHost, 0).ok());
  const std::vector<Piece> pieces = r.Pieces();
  ASSERT_EQ(pieces.size(), want);
  uint64_t at = kAddr;
  for (const Piece& p : pieces) {
    ASSERT_EQ(p.base, at);
    ASSERT_GT(p.len, 0u);
    ASSERT_LE(p.len, piece);
    at += p.len;
  }
  EXPECT_EQ(at, kAddr + kLen);
}

TEST(RegistryTest, AHugeRegionIsCutIntoExactlyItsPieces) {
  // The largest piece_bytes AgentOptions takes: 65,536 pieces, the step past the
  // last wrapped to 0.
  ExpectCut(AgentOptions::kMaxPieceBytes, 1u << 16);
  ExpectCut(uint64_t{1} << 62, 4);           // stepped 0, 2^62, 2^63, 3 x 2^62, 0, ...
  ExpectCut((uint64_t{1} << 63) + 4096, 2);  // stepped past 2^64 to 8192, 2^63 + 12288, ...
  ExpectCut(~uint64_t{0}, 1);
}

// A range whose end does not fit in 64 bits is refused, one that ends at
// 2^64 - 1 is taken.
TEST(RegistryTest, ARangePastTheAddressSpaceIsRefused) {
  Registry r(AgentOptions::kMaxPieceBytes);
  EXPECT_EQ(r.Add(kAddr, ~uint64_t{0} - kAddr + 1, MemoryKind::kHost, 0).status().code(),
            Code::kInvalidArgument);
  EXPECT_TRUE(r.Add(kAddr, ~uint64_t{0} - kAddr, MemoryKind::kHost, 0).ok());
}

// Live answers for each key in order: a removed region's keys and an unknown
// key are not live, the others are; after Close() none is.
TEST(RegistryTest, LiveSaysWhichKeysStillNameAPiece) {
  Registry r(4096);
  auto kept = r.Add(kAddr, 2 * 4096, MemoryKind::kHost, 0);
  auto gone = r.Add(kAddr + 4 * 4096, 4096, MemoryKind::kHost, 0);
  ASSERT_TRUE(kept.ok() && gone.ok());
  std::vector<uint64_t> keys;
  for (const Piece& p : r.Pieces()) keys.push_back(p.key);  // sorted by base: kept's two, gone's
  ASSERT_EQ(keys.size(), 3u);
  ASSERT_TRUE(r.Remove(gone.value()).ok());
  keys.push_back(keys[0] ^ 1);  // no piece's key (keys are random; this one is not among them)
  ASSERT_FALSE(r.HasKey(keys[3]));
  EXPECT_EQ(r.Live(keys), (std::vector<bool>{true, true, false, false}));
  EXPECT_TRUE(r.Live({}).empty());
  r.Close();
  EXPECT_EQ(r.Live(keys), (std::vector<bool>(4, false)));
}

}  // namespace
}  // namespace kvlane::core
