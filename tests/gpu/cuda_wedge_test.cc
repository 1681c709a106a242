// cuda_transfer_test's cases of a GPU that stops answering (a wedge), as the
// lane sees one: its copy streams held behind a host callback
// (CudaChannel::HoldLaneForTest) until the test lets them go. The lane gives
// up after io_timeout and latches kTimeout; a post it gave up on is poisoned:
// DeregisterMemory of its region says not to free the memory (the held copy
// still moves once the GPU goes on, which these tests then watch happen), and
// the agent is destroyed without waiting for the device. A record that lands
// as the lane gives up stands: a post once read ok never reads an error.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "core/agent_impl.h"
#include "core/request.h"
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
  // An agent with one lane and a short io_timeout, a registered source and a
  // target region, and h_: a WRITE of them, posted once (its payload kOld
  // moved, the tables uploaded, the lane idle again). Then the source reads
  // kNew, and the lane's peer channel is in cuda_.
  void SetUpWrite(Shape shape);
  // Every piece of the target reads `byte`.
  bool Moved(int byte);
  // Holds the lane, posts h_ again, and checks what a wedge must give; then
  // lets the GPU go on.
  void WedgeAndRelease(Shape shape);
  // Holds the lane, posts h_ again, and lets the GPU go on just as the lane
  // gives up, before its last look at the record: the post stands as ok.
  void LandAsTheLaneGivesUp(Shape shape);

  std::atomic<bool> release_{false};
  uint64_t span_ = 0, piece_ = 0;
  uint8_t* src_ = nullptr;
  RegionId region_{};
  Remote dst_{};
  XferHandle h_{};
  core::CudaChannel* cuda_ = nullptr;
};

constexpr uint64_t kBytes = 1 << 20;   // past cuda_proxy_max_bytes: a copy stream's work
constexpr uint64_t kPiece = 16 << 10;  // scattered: 64 pieces, every other 16 KiB
constexpr auto kIoTimeout = 300ms;
constexpr int kOld = 0x5a, kNew = 0xa5;  // the payload before and during the wedge

void CudaWedgeTest::SetUpWrite(Shape shape) {
  AgentOptions o;
  o.lanes_per_peer = 1;
  o.io_timeout = kIoTimeout;
  MakeAgent(o);
  const bool scattered = shape == Shape::kScattered;
  span_ = scattered ? 2 * kBytes : kBytes;  // scattered: every other piece
  piece_ = scattered ? kPiece : kBytes;
  src_ = DevAlloc(span_);
  auto fill = [&](int byte) {
    ASSERT_EQ(cudaMemset(src_, byte, span_), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(cudaStreamLegacy), cudaSuccess);
  };
  fill(kOld);
  auto region = agent_->RegisterMemory(src_, span_, MemoryKind::kCuda);
  ASSERT_TRUE(region.ok()) << region.status().ToString();
  region_ = region.value();
  dst_ = Alloc(span_);
  Load();
  DescList l{MemoryKind::kCuda, {}}, r{MemoryKind::kCuda, {}};
  for (uint64_t off = 0; off < span_; off += 2 * piece_) {
    l.Add(reinterpret_cast<uint64_t>(src_) + off, piece_);
    r.Add(dst_.addr + off, piece_);
  }
  h_ = Make(Op::kWrite, l, r, shape == Shape::kNotified ? "wedge" : "");
  ASSERT_TRUE(PostWait(&h_).ok());
  ASSERT_TRUE(Moved(kOld));
  fill(kNew);
  auto ch = agent_->impl()->PeerChannel("target");
  ASSERT_TRUE(ch.ok());
  cuda_ = dynamic_cast<core::CudaChannel*>(ch.value());
  ASSERT_NE(cuda_, nullptr);
}

bool CudaWedgeTest::Moved(int byte) {
  for (uint64_t off = 0; off < span_; off += 2 * piece_) {
    if (target_.Call("checkbyte " + std::to_string(dst_.addr + off) + " " + std::to_string(piece_) +
                     " " + std::to_string(byte)) != "-1")
      return false;
  }
  return true;
}

void CudaWedgeTest::WedgeAndRelease(Shape shape) {
  ASSERT_NO_FATAL_FAILURE(SetUpWrite(shape));
  ASSERT_TRUE(cuda_->HoldLaneForTest(0, &release_).ok());
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_FALSE(agent_->Post(&h_).is_error());
  (void)agent_->Wait(h_, 20 * kIoTimeout);
  const Status s = agent_->Check(h_);
  EXPECT_EQ(s.code(), Code::kTimeout) << s.ToString();
  EXPECT_NE(s.message().find("io_timeout"), std::string::npos) << s.ToString();
  EXPECT_GE(std::chrono::steady_clock::now() - t0, kIoTimeout);
  EXPECT_EQ(agent_->PeerError("target").code(), Code::kTimeout);
  EXPECT_EQ(agent_->Post(&h_).code(), Code::kTimeout) << "the lane's error latched";
  EXPECT_TRUE(Moved(kOld)) << "nothing moved while the GPU was held";

  // The lane gave up on a copy the GPU still holds: the region goes for new
  // posts, but its memory must not be freed.
  Status d = agent_->DeregisterMemory(region_);
  EXPECT_EQ(d.code(), Code::kBackend) << d.ToString();
  EXPECT_NE(d.message().find("do not free"), std::string::npos) << d.ToString();
  EXPECT_EQ(agent_->DeregisterMemory(region_).code(), Code::kNotFound);

  // The GPU goes on: the held copy lands (what the poisoned post protected
  // against), and the agent is destroyed without waiting for the device.
  release_.store(true, std::memory_order_release);
  const auto until = std::chrono::steady_clock::now() + 10s;
  bool landed = false;
  while (!(landed = Moved(kNew)) && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(10ms);
  EXPECT_TRUE(landed) << "the held copy never landed";
  // The GPU may have written {gen, ok} over the published error: it stands.
  EXPECT_EQ(agent_->Check(h_).code(), Code::kTimeout);
  EXPECT_EQ(agent_->Release(&h_).code(), Code::kOk);
  const auto t1 = std::chrono::steady_clock::now();
  agent_.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - t1, 10 * kIoTimeout);
}

void CudaWedgeTest::LandAsTheLaneGivesUp(Shape shape) {
  ASSERT_NO_FATAL_FAILURE(SetUpWrite(shape));
  // On the lane's retire thread, once io_timeout passed: the GPU goes on, and
  // the record lands before the lane looks at it again. A Check made then
  // reads ok (the copy did move); no answer after it may say otherwise.
  Status seen = Status::NotFound("the lane never gave up");
  std::atomic<bool> hooked{false};
  cuda_->SetGiveUpHookForTest([&] {
    release_.store(true, std::memory_order_release);
    const auto until = std::chrono::steady_clock::now() + 10s;
    while ((seen = agent_->Check(h_)).in_progress() && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(1ms);
    hooked.store(true, std::memory_order_release);
  });
  ASSERT_TRUE(cuda_->HoldLaneForTest(0, &release_).ok());
  ASSERT_FALSE(agent_->Post(&h_).is_error());
  const auto until = std::chrono::steady_clock::now() + 20 * kIoTimeout;
  while (!hooked.load(std::memory_order_acquire) && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(1ms);
  ASSERT_TRUE(hooked.load(std::memory_order_acquire)) << "the lane never gave up";
  EXPECT_TRUE(seen.ok()) << seen.ToString();
  EXPECT_TRUE(Moved(kNew));
  // The lane's decision, however it is timed against these reads.
  for (int k = 0; k < 100; ++k) {
    const Status s = agent_->Check(h_);
    ASSERT_TRUE(s.ok()) << "read ok, then " << s.ToString();
  }
  // The lane's io_timeout latched for new posts; this one stands.
  EXPECT_EQ(agent_->PeerError("target").code(), Code::kTimeout);
  EXPECT_EQ(agent_->Release(&h_).code(), Code::kOk);  // waits for the lane to let go
  // The GPU is done with the post: no poison is left to keep the region.
  EXPECT_EQ(agent_->DeregisterMemory(region_).code(), Code::kOk);
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

TEST_P(CudaWedgeTest, ContiguousRecordLandingAsTheLaneGivesUpStandsAsOk) {
  LandAsTheLaneGivesUp(Shape::kContiguous);
}
TEST_P(CudaWedgeTest, ScatteredRecordLandingAsTheLaneGivesUpStandsAsOk) {
  LandAsTheLaneGivesUp(Shape::kScattered);
}

// The agent closed while the GPU still holds a copy it gave up on: Close says to
// keep the memory (kBackend), and the record table stays mapped and allocated,
// so the record the GPU writes once it goes on lands there, with no fault on
// the device (before, the table was unmapped and freed under the pending
// write). The destruction does not wait for the device.
TEST_P(CudaWedgeTest, AnAgentClosedUnderAHeldCopyKeepsItsRecordsMapped) {
  ASSERT_NO_FATAL_FAILURE(SetUpWrite(Shape::kContiguous));
  ASSERT_TRUE(cuda_->HoldLaneForTest(0, &release_).ok());
  ASSERT_FALSE(agent_->Post(&h_).is_error());
  (void)agent_->Wait(h_, 20 * kIoTimeout);
  ASSERT_EQ(agent_->Check(h_).code(), Code::kTimeout);
  const std::atomic<uint64_t>* record = &agent_->impl()->SlotForTest(h_)->record;
  const uint64_t landed = core::PackRecord(h_.gen, Code::kOk);
  const auto t0 = std::chrono::steady_clock::now();
  const Status closed = agent_->Close();
  EXPECT_EQ(closed.code(), Code::kBackend) << closed.ToString();
  ASSERT_TRUE(agent_->impl()->context().records->abandoned());
  agent_.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 10 * kIoTimeout);
  release_.store(true, std::memory_order_release);
  const auto until = std::chrono::steady_clock::now() + 10s;
  while (record->load(std::memory_order_acquire) != landed &&
         std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(1ms);
  EXPECT_EQ(record->load(std::memory_order_acquire), landed) << "the GPU's record never landed";
  EXPECT_TRUE(Moved(kNew));
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

INSTANTIATE_TEST_SUITE_P(Topologies, CudaWedgeTest, ::testing::Values("two_gpus", "one_gpu"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace kvlane::test
