// Cancel semantics and the two progress policies.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "core/agent_impl.h"
#include "test_util.h"
#include "two_agents.h"

namespace kvlane::test {
namespace {

using namespace std::chrono_literals;

class CancelTest : public TwoAgents {
 protected:
  // One lane, 4 KiB chunks: a 64 MiB WRITE is 16384 chunks, more than the
  // lane can push into the stalled target's socket buffers, so whatever is
  // posted after it stays queued (not started) until the stall ends.
  void SetUp() override {
    AgentOptions o;
    o.lanes_per_peer = 1;
    o.chunk_bytes = 4096;
    o.lane_ring_slots = 1 << 15;
    ASSERT_NO_FATAL_FAILURE(MakeAgents(o, /*connect=*/false));
    src_.resize(kBig);
    dst_.resize(kBig);
    Fill(src_, 21);
    ASSERT_TRUE(a().RegisterMemory(src_.data(), kBig).ok());
    ASSERT_TRUE(b().RegisterMemory(dst_.data(), kBig).ok());
    ASSERT_TRUE(b().RegisterMemory(small_.data(), kSmall).ok());
    Connect(a(), b());
  }
  static constexpr uint64_t kBig = 64 << 20, kSmall = 8192;
  std::vector<uint8_t> src_, dst_, small_ = std::vector<uint8_t>(kSmall, 0xEE);
};

TEST_P(CancelTest, CancelOfFinishedRequestSucceeds) {
  auto h = MakeSimple(a(), "b", Op::kWrite, src_.data(), small_.data(), kSmall);
  ASSERT_TRUE(h.ok());
  EXPECT_TRUE(a().Cancel(h.value()).ok()) << "never posted";
  ASSERT_TRUE(PostAndWait(a(), &h.value()).ok());
  EXPECT_TRUE(a().Cancel(h.value()).ok());
  EXPECT_TRUE(a().Check(h.value()).ok()) << "cancel after the end must not change the result";
  EXPECT_EQ(FirstMismatch(small_.data(), kSmall, 21), -1);
  EXPECT_TRUE(a().Release(&h.value()).ok());
}

// A queued request (no lane started it) cancels: kOk, it ends kCanceled and
// moves nothing. The bulk request ahead, which a lane owns, refuses to cancel
// with a negative status, stays valid and completes correctly.
TEST_P(CancelTest, QueuedCancelsOwnedRefuses) {
  auto big = MakeSimple(a(), "b", Op::kWrite, src_.data(), dst_.data(), kBig);
  auto small = MakeSimple(a(), "b", Op::kWrite, src_.data(), small_.data(), kSmall, "no-show");
  ASSERT_TRUE(big.ok() && small.ok());
  Status owned;
  {
    RemoteStall stall(b());
    ASSERT_EQ(a().Post(&big.value()).code(), Code::kInProgress);
    ASSERT_EQ(a().Post(&small.value()).code(), Code::kInProgress);
    EXPECT_TRUE(a().Cancel(small.value()).ok());
    EXPECT_TRUE(a().Cancel(small.value()).ok()) << "cancel twice";
    // Once the lane has started the bulk request's first chunk (it then blocks
    // on the stalled target), a lane owns it.
    auto started = [&] {
      Result<uint32_t> n = a().impl()->ChunksStarted(big.value());
      return n.ok() ? n.value() : 0u;
    };
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (started() == 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(1ms);
    }
    ASSERT_GT(started(), 0u) << "no lane started the bulk request";
    owned = a().Cancel(big.value());
    EXPECT_EQ(a().Check(big.value()).code(), Code::kInProgress);
    EXPECT_EQ(a().Check(small.value()).code(), Code::kInProgress) << "published before the lane let go";
  }
  EXPECT_TRUE(owned.is_error()) << "cancel of a request a lane owns: " << owned.ToString();
  EXPECT_EQ(owned.code(), Code::kNotAllowed);
  EXPECT_TRUE(a().Wait(big.value(), 20s).ok());
  EXPECT_EQ(FirstMismatch(dst_.data(), kBig, 21), -1);
  EXPECT_EQ(a().Wait(small.value(), 20s).code(), Code::kCanceled);
  EXPECT_EQ(FirstNot(small_.data(), kSmall, 0xEE), -1) << "canceled request moved bytes";
  std::this_thread::sleep_for(50ms);
  EXPECT_TRUE(b().TakeNotifications().empty()) << "canceled request notified";
  // Both handles remain the caller's: repost the canceled one, release both.
  ASSERT_TRUE(PostAndWait(a(), &small.value()).ok());
  EXPECT_EQ(FirstMismatch(small_.data(), kSmall, 21), -1);
  EXPECT_TRUE(a().Release(&big.value()).ok());
  EXPECT_TRUE(a().Release(&small.value()).ok());
}

// Wait with nanoseconds::max() ("forever") waits for a request still in
// flight: the deadline saturates instead of wrapping into the past.
TEST_P(CancelTest, WaitForeverWaitsForTheEnd) {
  auto h = MakeSimple(a(), "b", Op::kWrite, src_.data(), small_.data(), kSmall);
  ASSERT_TRUE(h.ok());
  Status waited;
  {
    RemoteStall stall(b());
    ASSERT_EQ(a().Post(&h.value()).code(), Code::kInProgress);
    std::thread later([&stall] {
      std::this_thread::sleep_for(100ms);
      stall.Release();
    });
    waited = a().Wait(h.value(), std::chrono::nanoseconds::max());
    later.join();
  }
  EXPECT_TRUE(waited.ok()) << waited.ToString();
  EXPECT_EQ(FirstMismatch(small_.data(), kSmall, 21), -1);
  EXPECT_TRUE(a().Release(&h.value()).ok());
}

// Release of a queued request cancels it first and frees the slot.
TEST_P(CancelTest, ReleaseOfQueuedRequestCancelsIt) {
  auto big = MakeSimple(a(), "b", Op::kWrite, src_.data(), dst_.data(), kBig);
  auto small = MakeSimple(a(), "b", Op::kWrite, src_.data(), small_.data(), kSmall);
  ASSERT_TRUE(big.ok() && small.ok());
  auto stall = std::make_unique<RemoteStall>(b());
  ASSERT_EQ(a().Post(&big.value()).code(), Code::kInProgress);
  ASSERT_EQ(a().Post(&small.value()).code(), Code::kInProgress);
  XferHandle copy = small.value();
  std::thread release([&] {
    std::this_thread::sleep_for(200ms);
    stall->Release();
  });
  EXPECT_TRUE(a().Release(&small.value()).ok());  // waits until the lane skipped it
  release.join();
  EXPECT_EQ(a().Check(copy).code(), Code::kNotFound);
  EXPECT_TRUE(a().Wait(big.value(), 20s).ok());
  EXPECT_EQ(FirstNot(small_.data(), kSmall, 0xEE), -1);
}

INSTANTIATE_TEST_SUITE_P(Transports, CancelTest, ::testing::Values("local", "shm", "tcp"),
                         [](const auto& info) { return info.param; });

// Progress policies with two peers: a bulk request to b (stalled) posted first,
// a small one to c posted after it. independent: the small one completes while
// the bulk one is still in flight. global-fifo: the small one is never
// complete before the bulk one.
class PolicyTest : public ::testing::TestWithParam<std::tuple<std::string, ProgressPolicy>> {
 protected:
  Buffers bufs_;  // outlives the agents the test body makes
};

TEST_P(PolicyTest, SmallAfterBulkCompletionOrder) {
  auto [transport, policy] = GetParam();
  AgentOptions o = OptionsFor("a", transport);
  o.policy = policy;
  auto a = Agent::Create(o);
  auto b = Agent::Create(OptionsFor("b", transport));
  auto c = Agent::Create(OptionsFor("c", transport));
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  constexpr uint64_t kBulk = 16 << 20, kSmall = 4096;
  auto& src = bufs_.Make(kBulk);
  auto& bulk_dst = bufs_.Make(kBulk);
  auto& small_dst = bufs_.Make(kSmall);
  Fill(src, 33);
  ASSERT_TRUE(a.value()->RegisterMemory(src.data(), kBulk).ok());
  ASSERT_TRUE(b.value()->RegisterMemory(bulk_dst.data(), kBulk).ok());
  ASSERT_TRUE(c.value()->RegisterMemory(small_dst.data(), kSmall).ok());
  Connect(*a.value(), *b.value());
  Connect(*a.value(), *c.value());
  auto bulk = MakeSimple(*a.value(), "b", Op::kWrite, src.data(), bulk_dst.data(), kBulk);
  auto small = MakeSimple(*a.value(), "c", Op::kWrite, src.data(), small_dst.data(), kSmall);
  ASSERT_TRUE(bulk.ok() && small.ok());
  {
    RemoteStall stall(*b.value());
    ASSERT_EQ(a.value()->Post(&bulk.value()).code(), Code::kInProgress);
    ASSERT_EQ(a.value()->Post(&small.value()).code(), Code::kInProgress);
    if (policy == ProgressPolicy::kIndependent) {
      EXPECT_TRUE(a.value()->Wait(small.value(), 10s).ok()) << "small request waited for bulk";
      EXPECT_EQ(a.value()->Check(bulk.value()).code(), Code::kInProgress);
      EXPECT_EQ(FirstMismatch(small_dst.data(), kSmall, 33), -1);
    } else {
      // However long we wait, the small one cannot complete before the bulk one.
      EXPECT_EQ(a.value()->Wait(small.value(), 300ms).code(), Code::kTimeout);
      EXPECT_EQ(a.value()->Check(bulk.value()).code(), Code::kInProgress);
    }
  }
  EXPECT_TRUE(a.value()->Wait(bulk.value(), 20s).ok());
  EXPECT_TRUE(a.value()->Wait(small.value(), 20s).ok());
  EXPECT_EQ(FirstMismatch(bulk_dst.data(), kBulk, 33), -1);
  EXPECT_EQ(FirstMismatch(small_dst.data(), kSmall, 33), -1);
}

INSTANTIATE_TEST_SUITE_P(
    Policies, PolicyTest,
    ::testing::Combine(::testing::Values("local", "shm", "tcp"),
                       ::testing::Values(ProgressPolicy::kIndependent, ProgressPolicy::kGlobalFifo)),
    [](const auto& info) {
      std::string p = PolicyName(std::get<1>(info.param));
      std::replace(p.begin(), p.end(), '-', '_');
      return std::get<0>(info.param) + "_" + p;
    });

}  // namespace
}  // namespace kvlane::test
