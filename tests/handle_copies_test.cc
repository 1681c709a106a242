// Copies of one transfer handle used on two threads at once, against Post's and
// Release's REQUIRES: the engine refuses one of them (kNotAllowed or kNotFound)
// instead of resetting or freeing a post under the other.
#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <thread>
#include <vector>

#include "core/agent_impl.h"
#include "core/request.h"
#include "test_util.h"
#include "two_agents.h"

namespace kvlane::test {
namespace {

class HandleCopiesTest : public TwoAgents {
 protected:
  void SetUp() override {
    AgentOptions o;
    o.max_requests = kSlots;
    ASSERT_NO_FATAL_FAILURE(MakeAgents(o, /*connect=*/false));
    Fill(src_, 7);
    ASSERT_TRUE(a().RegisterMemory(src_.data(), kBytes).ok());
    ASSERT_TRUE(b().RegisterMemory(dst_.data(), kBytes).ok());
    Connect(a(), b());
    DescList l, r;
    l.Add(src_.data(), kBytes);
    r.Add(dst_.data(), kBytes);
    auto lp = a().PrepareLocal(l);
    auto rp = a().PrepareRemote("b", r);
    ASSERT_TRUE(lp.ok() && rp.ok());
    local_ = *lp;
    remote_ = *rp;
  }
  Result<XferHandle> Make() { return a().MakeTransfer(Op::kWrite, local_, {}, remote_, {}); }

  static constexpr uint64_t kBytes = 4096;
  static constexpr uint32_t kSlots = 8;
  std::vector<uint8_t> src_ = std::vector<uint8_t>(kBytes), dst_ = std::vector<uint8_t>(kBytes);
  PreparedId local_, remote_;
};

// A slot whose claim another thread holds (as inside its Post or Release):
// Post and Release of a copy are refused with nothing done; once the claim is
// let go, the copy posts and the older copy reads as stale.
TEST_P(HandleCopiesTest, AClaimedSlotRefusesPostAndReleaseOfACopy) {
  auto made = Make();
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  XferHandle h = *made;
  ASSERT_TRUE(PostAndWait(a(), &h).ok());
  XferHandle copy = h;
  core::Request* r = a().impl()->SlotForTest(h);
  ASSERT_NE(r, nullptr);
  r->posting.store(true);  // another thread's Post holds the slot
  Status post = a().Post(&copy);
  EXPECT_EQ(post.code(), Code::kNotAllowed) << post.ToString();
  EXPECT_EQ(copy.gen, h.gen);
  EXPECT_TRUE(a().Check(h).ok()) << "a refused post must leave the record alone";
  Status release = a().Release(&copy);
  EXPECT_EQ(release.code(), Code::kNotAllowed) << release.ToString();
  EXPECT_TRUE(copy.valid());
  r->posting.store(false);
  ASSERT_TRUE(PostAndWait(a(), &copy).ok());
  EXPECT_EQ(a().Post(&h).code(), Code::kNotFound);
  EXPECT_EQ(a().Release(&h).code(), Code::kNotFound);
  EXPECT_TRUE(a().Release(&copy).ok());
}

// Rounds of two threads with copies of one idle handle: both post, or one
// posts while the other releases. Exactly one of them succeeds each round;
// a successful post ends kOk with its bytes in place; no slot is freed twice
// (every slot handed out afterwards is a different one).
TEST_P(HandleCopiesTest, TwoThreadsWithCopiesNeverBothSucceed) {
  constexpr int kRounds = 300;
  for (int round = 0; round < kRounds; ++round) {
    const bool release = round % 2 == 1;
    auto made = Make();
    ASSERT_TRUE(made.ok()) << made.status().ToString();
    XferHandle first = *made, second = *made;
    std::atomic<int> ready{0};
    Status s1, s2;
    auto go = [&] {
      ready.fetch_add(1);
      while (ready.load() < 2) {
      }
    };
    std::thread t([&] {
      go();
      s2 = release ? a().Release(&second) : a().Post(&second);
    });
    go();
    s1 = a().Post(&first);
    t.join();
    const bool posted1 = s1.in_progress() || s1.ok();
    const bool ok2 = release ? s2.ok() : (s2.in_progress() || s2.ok());
    ASSERT_NE(posted1, ok2) << "round " << round << ": " << s1.ToString() << " / " << s2.ToString();
    for (const Status& lost : {posted1 ? s2 : s1}) {
      EXPECT_TRUE(lost.code() == Code::kNotAllowed || lost.code() == Code::kNotFound)
          << "round " << round << ": " << lost.ToString();
    }
    XferHandle* live = posted1 ? &first : (release ? nullptr : &second);
    if (live == nullptr) continue;  // released: the slot is free again
    ASSERT_TRUE(a().Wait(*live, std::chrono::seconds(10)).ok()) << "round " << round;
    ASSERT_EQ(FirstMismatch(dst_.data(), kBytes, 7), -1) << "round " << round;
    ASSERT_TRUE(a().Release(live).ok()) << "round " << round;
  }
  std::vector<XferHandle> all;
  std::set<uint32_t> slots;
  for (uint32_t i = 0; i < kSlots; ++i) {
    auto made = Make();
    ASSERT_TRUE(made.ok()) << "slot " << i << ": " << made.status().ToString();
    all.push_back(*made);
    slots.insert(made->slot);
  }
  EXPECT_EQ(slots.size(), kSlots);
  EXPECT_EQ(Make().status().code(), Code::kNotAllowed) << "every slot is taken";
  for (XferHandle& h : all) EXPECT_TRUE(a().Release(&h).ok());
}

INSTANTIATE_TEST_SUITE_P(Transports, HandleCopiesTest, ::testing::Values("local", "shm", "tcp"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace kvlane::test
