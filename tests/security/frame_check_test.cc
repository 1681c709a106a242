// The pure wire checks (transport/stream/frame_check.h) and the metadata
// decoder on hand-made bad input; the fuzzers (fuzz/) cover the rest.
#include <gtest/gtest.h>

#include <cstring>

#include "core/bytes.h"
#include "core/metadata.h"
#include "transport/stream/frame_check.h"

namespace kvlane::core {
namespace {

FrameHeader Header(FrameType type, uint32_t nseg, uint64_t bytes) {
  FrameHeader h{};
  h.type = static_cast<uint8_t>(type);
  h.nseg = nseg;
  h.bytes = bytes;
  return h;
}

TEST(FrameCheck, HeaderLimits) {
  EXPECT_TRUE(CheckFrameHeader(Header(FrameType::kRead, 1, 1)).ok());
  EXPECT_TRUE(CheckFrameHeader(Header(FrameType::kWrite, kMaxWireSegs, kMaxFrameBytes)).ok());
  EXPECT_FALSE(CheckFrameHeader(Header(FrameType::kWrite, 0, 1)).ok());
  EXPECT_FALSE(CheckFrameHeader(Header(FrameType::kWrite, kMaxWireSegs + 1, 1)).ok());
  EXPECT_FALSE(CheckFrameHeader(Header(FrameType::kRead, 1, 0)).ok());
  EXPECT_FALSE(CheckFrameHeader(Header(FrameType::kRead, 1, kMaxFrameBytes + 1)).ok());
  EXPECT_TRUE(CheckFrameHeader(Header(FrameType::kNotify, 0, kMaxNotifyBytes)).ok());
  EXPECT_FALSE(CheckFrameHeader(Header(FrameType::kNotify, 0, kMaxNotifyBytes + 1)).ok());
  EXPECT_FALSE(CheckFrameHeader(Header(FrameType::kNotify, 1, 0)).ok());
  EXPECT_TRUE(CheckFrameHeader(Header(FrameType::kNop, 0, 0)).ok());
  EXPECT_FALSE(CheckFrameHeader(Header(FrameType::kNop, 0, 1)).ok());
  for (int t : {0, 5, 100, 255}) EXPECT_FALSE(CheckFrameHeader(Header(static_cast<FrameType>(t), 0, 0)).ok());
}

TEST(FrameCheck, SegmentsMustAddUp) {
  FrameHeader h = Header(FrameType::kWrite, 2, 48);
  WireSeg ok[2] = {{1, 0x1000, 16, 0}, {1, 0x2000, 32, 0}};
  EXPECT_TRUE(CheckSegments(h, ok).ok());
  WireSeg zero[2] = {{1, 0x1000, 48, 0}, {1, 0x2000, 0, 0}};
  EXPECT_FALSE(CheckSegments(h, zero).ok());
  WireSeg wrap[2] = {{1, 0x1000, 64, 0}, {1, 0x2000, UINT64_MAX - 15, 0}};  // sums to 48 mod 2^64
  EXPECT_FALSE(CheckSegments(h, wrap).ok());
  EXPECT_FALSE(CheckSegments(h, std::span<const WireSeg>(ok, 1)).ok());
}

TEST(FrameCheck, HelloNeedsIdSecretVersionAndName) {
  Secret secret{};
  for (size_t i = 0; i < secret.size(); ++i) secret[i] = static_cast<uint8_t>(i * 7 + 1);
  HelloFrame h{};
  h.magic = kHelloMagic;
  h.version = kWireVersion;
  h.name_len = 3;
  h.target_id = 42;
  std::memcpy(h.secret, secret.data(), secret.size());
  EXPECT_TRUE(CheckHello(h, 42, secret).ok());
  EXPECT_EQ(CheckHello(h, 43, secret).code(), Code::kNotAllowed);
  HelloFrame bad = h;
  bad.secret[15] ^= 0x80;
  EXPECT_EQ(CheckHello(bad, 42, secret).code(), Code::kNotAllowed);
  bad = h;
  bad.version = kWireVersion + 1;
  EXPECT_FALSE(CheckHello(bad, 42, secret).ok());
  bad = h;
  bad.magic = 0;
  EXPECT_FALSE(CheckHello(bad, 42, secret).ok());
  bad = h;
  bad.name_len = 0;
  EXPECT_FALSE(CheckHello(bad, 42, secret).ok());
}

AgentMeta SampleMeta() {
  AgentMeta m;
  m.name = "target";
  m.agent_id = 7;
  m.pieces = {{11, 0x10000, 4096, 1, MemoryKind::kHost, 0}, {12, 0x20000, 4096, 2, MemoryKind::kHost, 0}};
  return m;
}

TEST(MetadataDecode, RoundTripAndEveryTruncationFails) {
  std::string blob = EncodeMeta(SampleMeta());
  auto m = DecodeMeta(blob);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->pieces.size(), 2u);
  for (size_t n = 0; n < blob.size(); ++n)
    EXPECT_EQ(DecodeMeta(std::string_view(blob).substr(0, n)).status().code(), Code::kInvalidArgument) << n;
  EXPECT_FALSE(DecodeMeta(blob + "x").ok());
}

TEST(MetadataDecode, RejectsInconsistentPieces) {
  auto bad = [](auto mutate) {
    AgentMeta m = SampleMeta();
    mutate(m);
    return DecodeMeta(EncodeMeta(m)).status().code();
  };
  EXPECT_EQ(bad([](AgentMeta& m) { m.pieces[1].base = m.pieces[0].base + 100; }), Code::kInvalidArgument);
  EXPECT_EQ(bad([](AgentMeta& m) { std::swap(m.pieces[0], m.pieces[1]); }), Code::kInvalidArgument);
  EXPECT_EQ(bad([](AgentMeta& m) { m.pieces[0].len = 0; }), Code::kInvalidArgument);
  EXPECT_EQ(bad([](AgentMeta& m) { m.pieces[0].key = 0; }), Code::kInvalidArgument);
  EXPECT_EQ(bad([](AgentMeta& m) { m.pieces[1].base = UINT64_MAX - 10; }), Code::kInvalidArgument);
  EXPECT_EQ(bad([](AgentMeta& m) { m.pieces[0].kind = static_cast<MemoryKind>(9); }), Code::kInvalidArgument);
  EXPECT_EQ(bad([](AgentMeta& m) { m.name.clear(); }), Code::kInvalidArgument);
  EXPECT_EQ(bad([](AgentMeta& m) { m.name.assign(300, 'n'); }), Code::kInvalidArgument);
}

TEST(MetadataDecode, HugeCountsFailWithoutAllocating) {
  std::string blob = EncodeMeta(SampleMeta());
  // The piece count is the u32 before the 2 x 37-byte piece table at the end.
  size_t count_at = blob.size() - 2 * 37 - 4;
  uint32_t huge = 0xffffffffu;
  std::memcpy(blob.data() + count_at, &huge, 4);
  EXPECT_FALSE(DecodeMeta(blob).ok());
  // A string length far beyond the blob.
  std::string b2 = EncodeMeta(SampleMeta());
  std::memcpy(b2.data() + 6, &huge, 4);  // name length, after magic + version
  EXPECT_FALSE(DecodeMeta(b2).ok());
}

}  // namespace
}  // namespace kvlane::core
