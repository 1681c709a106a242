// A hand-crafted initiator that holds the blob (so it passes the handshake) and
// ignores the read-only flag: its raw WRITE frames into a read-only piece get
// not-allowed from the target (tcp and shm), the region's bytes stay as they
// were, and the connection keeps serving READs of it and WRITEs elsewhere.
#include <gtest/gtest.h>

#include <cstring>

#include "raw_peer.h"
#include "test_util.h"

namespace kvlane::test {
namespace {

using core::FrameType;
using core::WireSeg;

constexpr uint64_t kBody = 64 << 10;
constexpr uint64_t kGuard = 4 << 10;
constexpr uint64_t kPiece = 16 << 10;
constexpr int32_t kNotAllowed = static_cast<int32_t>(Code::kNotAllowed);

class ReadOnlyPeerTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    AgentOptions o = OptionsFor("target", GetParam());
    o.piece_bytes = kPiece;
    auto t = Agent::Create(o);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    target_ = std::move(t).value();
    auto ro = target_->RegisterMemory(ro_.body(), kBody, MemoryKind::kHost, 0, Access::kReadOnly);
    ASSERT_TRUE(ro.ok()) << ro.status().ToString();
    ASSERT_TRUE(target_->RegisterMemory(rw_.body(), kBody).ok());
    info_ = Inspect(target_->ExportMetadata().value());
  }
  void TearDown() override {
    EXPECT_TRUE(ro_.GuardsIntact() && ro_.BodyIntact()) << "the read-only region changed";
    EXPECT_TRUE(rw_.GuardsIntact());
  }

  RawPeer Authed() {
    auto p = RawPeer::Connect(GetParam(), info_.meta);
    EXPECT_TRUE(p.has_value());
    EXPECT_EQ(p->Hello(info_.meta.agent_id, info_.meta.secret).value_or(-100), 0);
    return std::move(*p);
  }
  bool cma() const { return GetParam() == "shm"; }
  // A segment at `addr` with the key of the piece that holds it (as the blob says).
  WireSeg Seg(const uint8_t* addr, uint64_t len) {
    const uint64_t a = reinterpret_cast<uint64_t>(addr);
    uint64_t key = 0;
    for (const core::Piece& p : info_.meta.pieces)
      if (a >= p.base && a - p.base < p.len) key = p.key;
    EXPECT_NE(key, 0u);
    return {key, a, len, cma() ? reinterpret_cast<uint64_t>(src_.data()) : 0};
  }
  std::optional<int32_t> Write(RawPeer& p, const std::vector<WireSeg>& segs) {
    uint64_t bytes = 0;
    for (const WireSeg& s : segs) bytes += s.len;
    return p.Write(segs, bytes, cma());
  }

  GuardedBuffer ro_{kBody, kGuard, 21};
  GuardedBuffer rw_{kBody, kGuard, 22};
  std::vector<uint8_t> src_ = std::vector<uint8_t>(kBody, 0x5a);  // CMA source (shm)
  std::unique_ptr<Agent> target_;
  TargetInfo info_;
};

TEST_P(ReadOnlyPeerTest, RawWriteIntoReadOnlyPieceIsNotAllowed) {
  RawPeer p = Authed();
  const uint8_t* b = ro_.body();
  struct Case {
    const char* what;
    std::vector<WireSeg> segs;
  } cases[] = {
      {"one byte", {Seg(b, 1)}},
      {"whole piece", {Seg(b + kPiece, kPiece)}},
      {"last bytes", {Seg(b + kBody - 16, 16)}},
      {"two read-only segments", {Seg(b, 8), Seg(b + 3 * kPiece, 8)}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    EXPECT_EQ(Write(p, c.segs).value_or(-100), kNotAllowed);
    EXPECT_TRUE(ro_.BodyIntact()) << "a refused WRITE moved bytes";
  }
}

// The frame is validated whole before its first byte moves.
TEST_P(ReadOnlyPeerTest, FrameMixingReadWriteAndReadOnlyMovesNothing) {
  RawPeer p = Authed();
  EXPECT_EQ(Write(p, {Seg(rw_.body(), 4096), Seg(ro_.body(), 4096)}).value_or(-100), kNotAllowed);
  EXPECT_EQ(Write(p, {Seg(ro_.body(), 4096), Seg(rw_.body(), 4096)}).value_or(-100), kNotAllowed);
  EXPECT_TRUE(rw_.BodyIntact()) << "the read-write segment of a refused frame was written";
}

TEST_P(ReadOnlyPeerTest, ConnectionKeepsServingReadsAndOtherWrites) {
  RawPeer p = Authed();
  EXPECT_EQ(Write(p, {Seg(ro_.body() + 100, 1000)}).value_or(-100), kNotAllowed);
  // A READ of the read-only region returns its bytes.
  ASSERT_TRUE(p.SendFrame(FrameType::kRead, 1, {Seg(ro_.body() + 100, 1000)}, 1000));
  auto r = p.ReadReply();
  ASSERT_TRUE(r.has_value());
  ASSERT_EQ(r->status, 0);
  std::vector<uint8_t> got(1000);
  if (cma()) {
    EXPECT_EQ(r->bytes, 0u);
    std::memcpy(got.data(), src_.data(), got.size());  // CMA wrote it into our memory
  } else {
    ASSERT_EQ(r->bytes, 1000u);
    ASSERT_TRUE(p.ReadPayload(got.data(), got.size()));
  }
  EXPECT_EQ(std::memcmp(got.data(), ro_.body() + 100, got.size()), 0);
  // A WRITE into the read-write region lands.
  std::fill(src_.begin(), src_.end(), 0x5a);
  EXPECT_EQ(Write(p, {Seg(rw_.body(), 16)}).value_or(-100), 0);
  EXPECT_EQ(rw_.body()[0], 0x5a);
  EXPECT_EQ(rw_.body()[15], 0x5a);
}

INSTANTIATE_TEST_SUITE_P(Stream, ReadOnlyPeerTest, ::testing::Values("tcp", "shm"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace kvlane::test
