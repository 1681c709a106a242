// Lane rings and request slots under pressure: 14 requests holding 28 ring
// slots at once, a post that runs out of ring space half way, then 129 more
// requests reusing the slots. Stale handles must never read as current.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "test_util.h"
#include "two_agents.h"

namespace kvlane::test {
namespace {

using namespace std::chrono_literals;

constexpr uint64_t kReq = 8192;  // 2 chunks of 4 KiB
constexpr int kOutstanding = 14;
constexpr uint32_t kMaxRequests = 16;

class RingTest : public TwoAgents {
 protected:
  void SetUp() override {
    AgentOptions o;
    o.lanes_per_peer = 1;
    o.chunk_bytes = 4096;
    o.lane_ring_slots = 32;
    o.max_requests = kMaxRequests;
    o.post_timeout = 300ms;
    ASSERT_NO_FATAL_FAILURE(MakeAgents(o, /*connect=*/false));
    src_.resize(kReq * 64);
    back_.resize(kReq * 64);
    dst_.resize(kReq * 64);
    ASSERT_TRUE(a().RegisterMemory(src_.data(), src_.size()).ok());
    ASSERT_TRUE(a().RegisterMemory(back_.data(), back_.size()).ok());
    ASSERT_TRUE(b().RegisterMemory(dst_.data(), dst_.size()).ok());
    Connect(a(), b());
  }
  // Request i moves the i-th 8 KiB slice (mod 64).
  XferHandle Make(Op op, int i, uint64_t bytes = kReq) {
    uint64_t off = (i % 64) * kReq;
    uint8_t* local = (op == Op::kWrite ? src_.data() : back_.data()) + off;
    auto h = MakeSimple(a(), "b", op, local, dst_.data() + off, bytes);
    EXPECT_TRUE(h.ok()) << h.status().ToString();
    return h.ok() ? h.value() : XferHandle{};
  }
  std::vector<uint8_t> src_, back_, dst_;
};

TEST_P(RingTest, FourteenOutstandingThenSlotReuse) {
  Fill(src_, 1);
  // 14 requests x 2 chunks = 28 of the lane's 32 ring slots, all held in flight
  // because the target is stalled.
  std::vector<XferHandle> hs;
  {
    RemoteStall stall(b());
    for (int i = 0; i < kOutstanding; ++i) {
      hs.push_back(Make(Op::kWrite, i));
      ASSERT_EQ(a().Post(&hs.back()).code(), Code::kInProgress) << i;
    }
    for (const auto& h : hs) ASSERT_EQ(a().Check(h).code(), Code::kInProgress);
  }
  for (int i = 0; i < kOutstanding; ++i) {
    ASSERT_TRUE(a().Wait(hs[i], 10s).ok()) << i;
    ASSERT_EQ(FirstMismatch(dst_.data() + i * kReq, kReq, 1, i * kReq), -1) << i;
  }
  std::vector<XferHandle> stale;
  for (auto& h : hs) {
    stale.push_back(h);
    ASSERT_TRUE(a().Release(&h).ok());
  }

  // 129 more requests through the 16 slots, in waves of 14 outstanding, mixing
  // WRITE and READ; every payload verified, every old handle stale.
  int done = 0;
  for (int wave = 0; done < 129; ++wave) {
    int n = std::min(kOutstanding, 129 - done);
    Fill(src_, 100 + wave);
    Fill(dst_, 200 + wave);
    hs.clear();
    for (int k = 0; k < n; ++k) hs.push_back(Make(k % 2 ? Op::kRead : Op::kWrite, done + k));
    for (auto& h : hs) ASSERT_FALSE(a().Post(&h).is_error());
    for (const auto& old : stale) {
      ASSERT_EQ(a().Check(old).code(), Code::kNotFound) << "stale handle read as current";
      XferHandle copy = old;
      ASSERT_EQ(a().Post(&copy).code(), Code::kNotFound);
      ASSERT_EQ(a().Cancel(old).code(), Code::kNotFound);
    }
    for (int k = 0; k < n; ++k) {
      ASSERT_TRUE(a().Wait(hs[k], 10s).ok()) << "request " << done + k;
      uint64_t off = ((done + k) % 64) * kReq;
      if (k % 2) {
        ASSERT_EQ(FirstMismatch(back_.data() + off, kReq, 200 + wave, off), -1) << done + k;
      } else {
        ASSERT_EQ(FirstMismatch(dst_.data() + off, kReq, 100 + wave, off), -1) << done + k;
      }
    }
    for (auto& h : hs) {
      stale.push_back(h);
      XferHandle copy = h;
      ASSERT_TRUE(a().Release(&h).ok());
      ASSERT_FALSE(h.valid());
      ASSERT_EQ(a().Release(&copy).code(), Code::kNotFound) << "double release";
    }
    done += n;
  }
  EXPECT_EQ(done, 129);
  EXPECT_GT(stale.size(), kMaxRequests);  // slots were reused many times over
}

// PostMayWait reads the ring: with 26 of the lane's 32 slots held by a stalled
// target, a 6-chunk transfer fits (false) and an 8-chunk one does not (true);
// once the 6-chunk one is queued even a 1-chunk post may wait; after the stall
// ends and the lane drains, none may. A stale handle answers false.
TEST_P(RingTest, PostMayWaitTellsAFullRing) {
  constexpr int kHeld = kOutstanding - 1;  // 13 x 2 slots: 16 request slots in all with the 3 below
  Fill(src_, 6);
  std::vector<XferHandle> hs;
  XferHandle six = Make(Op::kWrite, 20, 6 * 4096);
  XferHandle eight = Make(Op::kWrite, 24, 8 * 4096);
  XferHandle one = Make(Op::kWrite, 30, 4096);
  EXPECT_FALSE(a().PostMayWait(eight)) << "an idle ring has room for 8 of 32";
  {
    RemoteStall stall(b());
    for (int i = 0; i < kHeld; ++i) {
      hs.push_back(Make(Op::kWrite, i));
      ASSERT_EQ(a().Post(&hs.back()).code(), Code::kInProgress) << i;
    }
    EXPECT_FALSE(a().PostMayWait(six)) << "6 slots are free";
    EXPECT_TRUE(a().PostMayWait(eight)) << "8 chunks, 6 free slots";
    ASSERT_EQ(a().Post(&six).code(), Code::kInProgress);
    EXPECT_TRUE(a().PostMayWait(one)) << "every slot is held";
  }
  for (auto& h : hs) ASSERT_TRUE(a().Wait(h, 10s).ok());
  ASSERT_TRUE(a().Wait(six, 10s).ok());
  // A lane frees a post's slots as it completes or just after: wait for the
  // hint to clear rather than assume the order.
  const auto until = std::chrono::steady_clock::now() + 10s;
  while ((a().PostMayWait(one) || a().PostMayWait(eight)) &&
         std::chrono::steady_clock::now() < until)
    std::this_thread::yield();
  EXPECT_FALSE(a().PostMayWait(one));
  EXPECT_FALSE(a().PostMayWait(eight));
  ASSERT_TRUE(PostAndWait(a(), &eight).ok());
  EXPECT_EQ(FirstMismatch(dst_.data() + 24 * kReq, 8 * 4096, 6, 24 * kReq), -1);
  XferHandle stale = one;
  ASSERT_TRUE(a().Release(&one).ok());
  EXPECT_FALSE(a().PostMayWait(stale)) << "stale handle";
  EXPECT_FALSE(a().PostMayWait(XferHandle{})) << "never-made handle";
  for (XferHandle* h : {&six, &eight}) EXPECT_TRUE(a().Release(h).ok());
  for (auto& h : hs) EXPECT_TRUE(a().Release(&h).ok());
}

// A region deregistered since a handle's last post (any region): its next Post
// looks its own regions up again, under the registry's lock, so PostMayWait
// says it may wait until that post is made.
TEST_P(RingTest, PostMayWaitTellsARegionRemovedSinceTheLastPost) {
  XferHandle h = Make(Op::kWrite, 3);
  ASSERT_TRUE(PostAndWait(a(), &h).ok());
  EXPECT_FALSE(a().PostMayWait(h));
  std::vector<uint8_t> spare(4096);
  auto region = a().RegisterMemory(spare.data(), spare.size());
  ASSERT_TRUE(region.ok());
  EXPECT_FALSE(a().PostMayWait(h)) << "a registration changes nothing";
  ASSERT_TRUE(a().DeregisterMemory(*region).ok());
  EXPECT_TRUE(a().PostMayWait(h));
  ASSERT_TRUE(PostAndWait(a(), &h).ok());
  EXPECT_FALSE(a().PostMayWait(h)) << "the post looked its regions up";
  EXPECT_TRUE(a().Release(&h).ok());
}

// All 16 slots in use: the 17th MakeTransfer is refused, not blocked.
TEST_P(RingTest, SlotExhaustionIsRefused) {
  std::vector<XferHandle> hs;
  for (uint32_t i = 0; i < kMaxRequests; ++i) hs.push_back(Make(Op::kWrite, i));
  auto extra = MakeSimple(a(), "b", Op::kWrite, src_.data(), dst_.data(), kReq);
  EXPECT_EQ(extra.status().code(), Code::kNotAllowed);
  for (auto& h : hs) ASSERT_TRUE(a().Release(&h).ok());
  EXPECT_TRUE(MakeSimple(a(), "b", Op::kWrite, src_.data(), dst_.data(), kReq).ok());
}

// A careless caller keeps stale copies of released handles (and a zeroed one,
// {0, 0}) and goes on using them on one thread while another thread makes,
// posts and releases transfers that reuse those slots: every call on a stale
// copy reads stale (kNotFound) and never touches the live transfer, which
// completes every round; and it is no data race (run under TSan).
TEST_P(RingTest, StaleCopiesStayStaleWhileAnotherThreadReusesTheSlot) {
  Fill(src_, 9);
  std::vector<XferHandle> stale;
  for (int i = 0; i < 4; ++i) {
    XferHandle h = Make(Op::kWrite, i);
    stale.push_back(h);
    ASSERT_TRUE(a().Release(&h).ok());
  }
  // The slot's generation before its first transfer: never live again (but after
  // 2^32 posts). (XferHandle{0, 0} is not: generations start at random.)
  stale.push_back(XferHandle{stale[0].slot, stale[0].gen - 1});
  std::atomic<bool> stop{false};
  std::atomic<int> not_stale{0};  // calls on a stale copy that did not say kNotFound
  std::thread careless([&] {
    auto stale_code = [&](Code c) { not_stale += c != Code::kNotFound; };
    while (!stop.load()) {
      for (XferHandle h : stale) {
        stale_code(a().Check(h).code());
        stale_code(a().Post(&h).code());
        stale_code(a().Cancel(h).code());
        stale_code(a().Describe(h).status().code());
        not_stale += a().PostMayWait(h);  // a stale handle may not wait: false
        stale_code(a().Release(&h).code());
      }
    }
  });
  for (int i = 0; i < 300; ++i) {
    XferHandle h = Make(Op::kWrite, i);
    Status s = PostAndWait(a(), &h);
    EXPECT_TRUE(s.ok()) << "round " << i << ": " << s.ToString();
    EXPECT_TRUE(a().Release(&h).ok()) << "round " << i;
    if (!s.ok()) break;
  }
  stop = true;
  careless.join();
  EXPECT_EQ(not_stale.load(), 0);
  EXPECT_EQ(FirstMismatch(dst_.data(), dst_.size(), 9), -1);
}

// A post that finds the ring full half way: 4 of its 8 chunks fit behind the 28
// held slots, the 5th times out. Post reports the timeout only after the 4
// launched chunks drained, so everything ahead of it in the lane is done too:
// not before the stall that holds them ends, well after post_timeout.
TEST_P(RingTest, PostFailingHalfWayReportsAfterDrain) {
  Fill(src_, 5);
  std::vector<XferHandle> hs;
  auto stall = std::make_unique<RemoteStall>(b());
  for (int i = 0; i < kOutstanding; ++i) {
    hs.push_back(Make(Op::kWrite, i));
    ASSERT_EQ(a().Post(&hs.back()).code(), Code::kInProgress);
  }
  XferHandle big = Make(Op::kWrite, 20, 8 * 4096);
  std::atomic<bool> releasing{false};  // set before the stall ends: no chunk drains sooner
  std::thread release([&] {
    // Well past post_timeout (300 ms), even for a Post that starts late on a
    // loaded machine (a post still waiting at the release would fit, and not
    // time out); well below io_timeout (10 s), which would fail the stalled lane.
    std::this_thread::sleep_for(3s);
    releasing.store(true);
    stall->Release();
  });
  Status s = a().Post(&big);
  const bool drained_first = releasing.load();
  release.join();
  EXPECT_EQ(s.code(), Code::kTimeout) << s.ToString();
  EXPECT_TRUE(drained_first) << "Post reported while its launched chunks were still held";
  EXPECT_EQ(a().Check(big).code(), Code::kTimeout);  // published before Post returned
  for (const auto& h : hs) EXPECT_TRUE(a().Check(h).ok()) << "FIFO lane retired the earlier chunks first";
  EXPECT_TRUE(a().PeerError("b").ok()) << "a full ring is not a fatal lane error";
  // The handle stays usable: repost succeeds now that the ring has room.
  ASSERT_TRUE(PostAndWait(a(), &big).ok());
  EXPECT_EQ(FirstMismatch(dst_.data() + 20 * kReq, 8 * 4096, 5, 20 * kReq), -1);
  EXPECT_TRUE(a().Release(&big).ok());
}

INSTANTIATE_TEST_SUITE_P(Transports, RingTest, ::testing::Values("local", "shm", "tcp"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace kvlane::test
