// cuda_transfer_test's cases of a GPU that stops answering (a wedge), as the
// lane sees one: its copy streams held behind a host callback
// (CudaChannel::HoldLaneForTest) until the test lets them go. The lane gives
// up after io_timeout and latches kTimeout; a post it gave up on is poisoned:
// DeregisterMemory of its region says not to free the memory (the held copy
// still moves once the GPU goes on, which these tests then watch happen), and
// the agent is destroyed without waiting for the device.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "core/agent_impl.h"
#include "cuda_transfer_fixture.h"
#include "target_proc.h"
#include "transport/cuda/cuda_channel.h"

namespace kvlane::test {
namespace {

using namespace std::chrono_literals;

enum class Shape { kContiguous, kScattered, kNotified };

class CudaWedgeTest : public CudaTransferTest {
 protected:
  void TearDown() override {
    release_.store(true, std::memory_order_release);
    (void)cudaDeviceSynchronize();  // the held streams drain before release_ goes
    CudaTransferTest::TearDown();
  }
  // WRITEs `kBytes` once (kept as it is), holds the lane, posts again with a
  // new payload, and checks what a wedge must give; then lets the GPU go on.
  void WedgeAndRelease(Shape shape);

  std::atomic<bool> release_{false};
};

constexpr uint64_t kBytes = 1 << 20;   // past cuda_proxy_max_bytes: a copy stream's work
constexpr uint64_t kPiece = 16 << 10;  // scattered: 64 pieces, every other 16 KiB
constexpr auto kIoTimeout = 300ms;
constexpr int kOld = 0x5a, kNew = 0xa5;  // the payload before and during the wedge

void CudaWedgeTest::WedgeAndRelease(Shape shape) {
  AgentOptions o;
  o.lanes_per_peer = 1;
  o.io_timeout = kIoTimeout;
  MakeAgent(o);
  const bool scattered = shape == Shape::kScattered;
  const uint64_t span = scattered ? 2 * kBytes : kBytes;  // scattered: every other piece
  uint8_t* src = DevAlloc(span);
  auto fill = [&](int byte) {
    ASSERT_EQ(cudaMemset(src, byte, span), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(cudaStreamLegacy), cudaSuccess);
  };
  fill(kOld);
  auto region = agent_->RegisterMemory(src, span, MemoryKind::kCuda);
  ASSERT_TRUE(region.ok()) << region.status().ToString();
  Remote dst = Alloc(span);
  Load();
  DescList l{MemoryKind::kCuda, {}}, r{MemoryKind::kCuda, {}};
  const uint64_t piece = scattered ? kPiece : kBytes;
  for (uint64_t off = 0; off < span; off += 2 * piece) {
    l.Add(reinterpret_cast<uint64_t>(src) + off, piece);
    r.Add(dst.addr + off, piece);
  }
  XferHandle h = Make(Op::kWrite, l, r, shape == Shape::kNotified ? "wedge" : "");
  ASSERT_TRUE(PostWait(&h).ok());  // tables uploaded, the lane idle again
  // Every piece of the target reads `byte`.
  auto moved = [&](int byte) {
    for (uint64_t off = 0; off < span; off += 2 * piece) {
      if (target_.Call("checkbyte " + std::to_string(dst.addr + off) + " " + std::to_string(piece) +
                       " " + std::to_string(byte)) != "-1")
        return false;
    }
    return true;
  };
  ASSERT_TRUE(moved(kOld));

  fill(kNew);
  auto ch = agent_->impl()->PeerChannel("target");
  ASSERT_TRUE(ch.ok());
  auto* cuda = dynamic_cast<core::CudaChannel*>(ch.value());
  ASSERT_NE(cuda, nullptr);
  ASSERT_TRUE(cuda->HoldLaneForTest(0, &release_).ok());
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_FALSE(agent_->Post(&h).is_error());
  (void)agent_->Wait(h, 20 * kIoTimeout);
  const Status s = agent_->Check(h);
  EXPECT_EQ(s.code(), Code::kTimeout) << s.ToString();
  EXPECT_NE(s.message().find("io_timeout"), std::string::npos) << s.ToString();
  EXPECT_GE(std::chrono::steady_clock::now() - t0, kIoTimeout);
  EXPECT_EQ(agent_->PeerError("target").code(), Code::kTimeout);
  EXPECT_EQ(agent_->Post(&h).code(), Code::kTimeout) << "the lane's error latched";
  EXPECT_TRUE(moved(kOld)) << "nothing moved while the GPU was held";

  // The lane gave up on a copy the GPU still holds: the region goes for new
  // posts, but its memory must not be freed.
  Status d = agent_->DeregisterMemory(region.value());
  EXPECT_EQ(d.code(), Code::kBackend) << d.ToString();
  EXPECT_NE(d.message().find("do not free"), std::string::npos) << d.ToString();
  EXPECT_EQ(agent_->DeregisterMemory(region.value()).code(), Code::kNotFound);

  // The GPU goes on: the held copy lands (what the poisoned post protected
  // against), and the agent is destroyed without waiting for the device.
  release_.store(true, std::memory_order_release);
  const auto until = std::chrono::steady_clock::now() + 10s;
  bool landed = false;
  while (!(landed = moved(kNew)) && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(10ms);
  EXPECT_TRUE(landed) << "the held copy never landed";
  // The GPU may have written {gen, ok} over the published error: it stands.
  EXPECT_EQ(agent_->Check(h).code(), Code::kTimeout);
  EXPECT_EQ(agent_->Release(&h).code(), Code::kOk);
  const auto t1 = std::chrono::steady_clock::now();
  agent_.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - t1, 10 * kIoTimeout);
}

// One cudaMemcpyAsync on the copy engine's stream; the GPU writes the record.
TEST_P(CudaWedgeTest, ContiguousCopyIsPoisonedAndKeepsItsRegion) {
  WedgeAndRelease(Shape::kContiguous);
}
// One copy kernel over the uploaded list on the kernels' stream.
TEST_P(CudaWedgeTest, ScatteredCopyIsPoisonedAndKeepsItsRegion) {
  WedgeAndRelease(Shape::kScattered);
}
// With a notification the host publishes the record (a queued batch).
TEST_P(CudaWedgeTest, NotifiedCopyIsPoisonedAndKeepsItsRegion) {
  WedgeAndRelease(Shape::kNotified);
}

INSTANTIATE_TEST_SUITE_P(Topologies, CudaWedgeTest, ::testing::Values("two_gpus", "one_gpu"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace kvlane::test
