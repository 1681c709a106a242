// A hand-crafted initiator against a target that registered device memory
// (host memory registered as kCuda, staged by the fake copier of
// tests/fake_copier.h): a frame mixing host and device pieces, and a device
// frame over shm, get error replies and move nothing; a READ of device memory
// over tcp carries the status trailer after its payload.
#include <gtest/gtest.h>

#include "fake_copier.h"
#include "raw_peer.h"
#include "test_util.h"

namespace kvlane::test {
namespace {

using core::FrameType;
using core::WireSeg;

constexpr uint64_t kBody = 16 << 10;
constexpr uint64_t kGuard = 4 << 10;

class HostileDevice : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    core::SetDeviceStagingForTest(&staging_);
    AgentOptions o = OptionsFor("target", GetParam());
    o.transports.push_back("cuda");  // lets shm's agent register kCuda too
    auto t = Agent::Create(o);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    target_ = std::move(t).value();
    ASSERT_TRUE(target_->RegisterMemory(host_.body(), kBody, MemoryKind::kHost).ok());
    ASSERT_TRUE(target_->RegisterMemory(dev_.body(), kBody, MemoryKind::kCuda).ok());
    meta_ = Inspect(target_->ExportMetadata().value()).meta;
    for (const core::Piece& p : meta_.pieces)
      (p.kind == MemoryKind::kCuda ? dev_key_ : host_key_) = p.key;
    ASSERT_TRUE(dev_key_ != 0 && host_key_ != 0);
  }
  void TearDown() override {
    target_.reset();
    EXPECT_TRUE(host_.GuardsIntact() && dev_.GuardsIntact()) << "a byte around a region changed";
    core::SetDeviceStagingForTest(nullptr);
  }
  RawPeer Authed() {
    auto p = RawPeer::Connect(GetParam(), meta_);
    EXPECT_TRUE(p.has_value());
    EXPECT_EQ(p->Hello(meta_.agent_id, meta_.secret).value_or(-100), 0);
    return std::move(*p);
  }
  bool cma() const { return GetParam() == "shm"; }
  WireSeg Seg(uint64_t key, uint8_t* at, uint64_t len) {
    return {key, reinterpret_cast<uint64_t>(at), len,
            cma() ? reinterpret_cast<uint64_t>(src_.data()) : 0};
  }
  std::optional<int32_t> Write(RawPeer& p, const std::vector<WireSeg>& segs, uint64_t bytes) {
    return p.Write(segs, bytes, cma());
  }

  FakeStaging staging_;
  GuardedBuffer host_{kBody, kGuard, 21};
  GuardedBuffer dev_{kBody, kGuard, 22};
  std::vector<uint8_t> src_ = std::vector<uint8_t>(kBody, 0x5a);
  std::unique_ptr<Agent> target_;
  core::AgentMeta meta_;
  uint64_t host_key_ = 0, dev_key_ = 0;
};

// One frame naming a host piece and a device piece is refused whole; the
// connection still serves a good frame after it (tcp: the payload was dropped).
TEST_P(HostileDevice, FrameMixingHostAndDeviceIsRefused) {
  RawPeer p = Authed();
  const std::vector<WireSeg> mixed = {Seg(host_key_, host_.body(), 4096),
                                      Seg(dev_key_, dev_.body(), 4096)};
  EXPECT_EQ(Write(p, mixed, 8192).value_or(-100), static_cast<int32_t>(Code::kInvalidArgument));
  EXPECT_TRUE(host_.BodyIntact() && dev_.BodyIntact());
  EXPECT_EQ(Write(p, {Seg(host_key_, host_.body(), 4096)}, 4096).value_or(-100), 0);
}

// Device memory over shm: refused (CMA cannot reach it), nothing moves. Over
// tcp the same frame is staged and lands.
TEST_P(HostileDevice, DeviceFrameIsStagedOnTcpAndRefusedOnShm) {
  RawPeer p = Authed();
  const auto code = Write(p, {Seg(dev_key_, dev_.body(), 4096)}, 4096);
  if (cma()) {
    EXPECT_EQ(code.value_or(-100), static_cast<int32_t>(Code::kNotSupported));
    EXPECT_TRUE(dev_.BodyIntact());
    EXPECT_EQ(staging_.counters.to_device.load(), 0u);
  } else {
    EXPECT_EQ(code.value_or(-100), 0);
    EXPECT_EQ(FirstNot(dev_.body(), 4096, 0x5a), -1);
    EXPECT_EQ(staging_.counters.to_device.load(), 4096u);
  }
}

// tcp: a READ of device memory says kReplyStatusAfter and sends a zero
// trailer after the payload. shm: refused, no payload.
TEST_P(HostileDevice, DeviceReadIsTrailedOnTcpAndRefusedOnShm) {
  RawPeer p = Authed();
  ASSERT_TRUE(p.SendFrame(FrameType::kRead, 0, {Seg(dev_key_, dev_.body(), 4096)}, 4096));
  auto r = p.ReadReply();
  ASSERT_TRUE(r.has_value());
  if (cma()) {
    EXPECT_EQ(r->status, static_cast<int32_t>(Code::kNotSupported));
    EXPECT_EQ(r->bytes, 0u);
    EXPECT_TRUE(dev_.BodyIntact());
    return;
  }
  EXPECT_EQ(r->status, 0);
  EXPECT_EQ(r->flags, core::kReplyStatusAfter);
  ASSERT_EQ(r->bytes, 4096u);
  std::vector<uint8_t> got(4096);
  ASSERT_TRUE(p.ReadPayload(got.data(), got.size()));
  EXPECT_EQ(0, std::memcmp(got.data(), dev_.body(), got.size()));
  core::StatusTrailer t{-1, 1};
  ASSERT_TRUE(p.ReadPayload(&t, sizeof(t)));
  EXPECT_EQ(t.status, 0);
}

INSTANTIATE_TEST_SUITE_P(Stream, HostileDevice, ::testing::Values("tcp", "shm"));

}  // namespace
}  // namespace kvlane::test
