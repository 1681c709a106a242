// The payload oracle: a payload verifies only with the source, epoch and slot it
// was made for, and the first bad byte is where it is.
#include "oracle.h"

#include <gtest/gtest.h>

#include <vector>

namespace lanebench {
namespace {

std::vector<uint8_t> Payload(uint64_t n, uint32_t source, uint64_t epoch, Slot slot) {
  std::vector<uint8_t> p(n);
  FillPayload(p.data(), n, source, epoch, slot);
  return p;
}

TEST(Oracle, APayloadVerifiesAgainstWhatItWasMadeFor) {
  for (uint64_t n : {8u, 9u, 15u, 16u, 4096u, 4101u}) {
    const auto p = Payload(n, 2, 7, {1, 4096});
    EXPECT_EQ(FirstMismatch(p.data(), n, 2, 7, {1, 4096}), -1) << n;
  }
}

TEST(Oracle, TheFirstBadByteIsFound) {
  auto p = Payload(4101, 0, 3, {0, 0});
  for (uint64_t at : {4100u, 2048u, 9u}) {
    p[at] ^= 1;
    EXPECT_EQ(FirstMismatch(p.data(), p.size(), 0, 3, {0, 0}), static_cast<int64_t>(at));
  }
  p[0] ^= 1;  // the epoch marker
  EXPECT_EQ(FirstMismatch(p.data(), p.size(), 0, 3, {0, 0}), 0);
}

TEST(Oracle, AnotherSourceEpochOrSlotDoesNotVerify) {
  const auto p = Payload(4096, 1, 5, {0, 0});
  EXPECT_EQ(FirstMismatch(p.data(), p.size(), 1, 6, {0, 0}), 0) << "epoch: the marker";
  EXPECT_EQ(FirstMismatch(p.data(), p.size(), 2, 5, {0, 0}), 8) << "source";
  EXPECT_EQ(FirstMismatch(p.data(), p.size(), 1, 5, {1, 0}), 8) << "target";
  EXPECT_EQ(FirstMismatch(p.data(), p.size(), 1, 5, {0, 4096}), 8) << "offset";
}

// --mixed-op read --mixed-peers 1: one target holds the bulk payload at 0 and the
// small one right after it. A small read misaddressed to offset 0 gets the bulk's
// first bytes: same rank, same epoch, same offsets within the payload. Only the
// slot tells them apart.
TEST(Oracle, ASmallReadFromTheBulksPlaceFails) {
  constexpr uint64_t kBulk = 1 << 16, kSmall = 4096;
  std::vector<uint8_t> target(kBulk + kSmall);
  FillPayload(target.data(), kBulk, 1, 9, {0, 0});
  FillPayload(target.data() + kBulk, kSmall, 1, 9, {0, kBulk});
  EXPECT_EQ(FirstMismatch(target.data() + kBulk, kSmall, 1, 9, {0, kBulk}), -1) << "its own place";
  EXPECT_GE(FirstMismatch(target.data(), kSmall, 1, 9, {0, kBulk}), 0) << "the bulk's place";
}

}  // namespace
}  // namespace lanebench
