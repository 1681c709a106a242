// Request::PoisonedOutcome: Check's answer for a post whose lane gave up on it
// while the GPU held it (poisoned) and whose record reads {gen, ok} (the GPU
// wrote it). The lane decides after its last look at the record: it lifts the
// poison (the record had landed: ok) or sets the post's error (which stands).
// Until then the answer is undecided, and PoisonedOutcome waits for it rather
// than read ok and let a later Check read the error. DeregisterMemory waits
// the same way (Request::AwaitOffRegions) before it says whether the region's
// memory must stay.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "core/request.h"

namespace kvlane::core {
namespace {

using namespace std::chrono_literals;

constexpr uint32_t kGen = 7;

// A request as Check finds it once the GPU wrote {kGen, ok} over a poisoned
// post (its record word in pinned host memory, here a plain one).
struct Poisoned {
  std::atomic<uint64_t> word{PackRecord(kGen, Code::kOk)};
  Request r{word};
  Poisoned() { r.poisoned.store(true); }
};

TEST(PoisonedOutcome, ReadsTheLanesErrorOnceSet) {
  Poisoned p;
  Request& r = p.r;
  r.SetError(Status::Timeout("gave up"));
  EXPECT_EQ(r.PoisonedOutcome(kGen), Code::kTimeout);
}

TEST(PoisonedOutcome, ReadsOkOncePoisonIsLifted) {
  Poisoned p;
  Request& r = p.r;
  r.poisoned.store(false);
  EXPECT_EQ(r.PoisonedOutcome(kGen), Code::kOk);
}

// call() on a poisoned request whose lane runs `decide` 50 ms later, on a
// thread of its own; fails the test if it answered before.
template <class Call, class F>
auto AnsweredAfterTheLane(Call call, F decide) {
  std::atomic<bool> decided{false};
  std::thread lane([&] {
    std::this_thread::sleep_for(50ms);
    decided.store(true);
    decide();
  });
  const auto answer = call();
  EXPECT_TRUE(decided.load()) << "answered before the lane decided";
  lane.join();
  return answer;
}

template <class F>
Code OutcomeDecidedLater(Request& r, F decide) {
  return AnsweredAfterTheLane([&] { return r.PoisonedOutcome(kGen); }, decide);
}

// The lane sets the error a moment after the GPU's ok landed: the answer is
// the error, never ok first.
TEST(PoisonedOutcome, WaitsForTheLanesErrorWhileUndecided) {
  Poisoned p;
  EXPECT_EQ(OutcomeDecidedLater(p.r, [&] { p.r.SetError(Status::Timeout("gave up")); }),
            Code::kTimeout);
}

// The lane's last look found the record landed: it lifts the poison, and the
// post reads ok.
TEST(PoisonedOutcome, WaitsForThePoisonToLiftWhileUndecided) {
  Poisoned p;
  EXPECT_EQ(OutcomeDecidedLater(p.r, [&] { p.r.poisoned.store(false, std::memory_order_release); }),
            Code::kOk);
}

// A copy of the handle, read while the owner posts the slot again: stale.
TEST(PoisonedOutcome, ReadsNotFoundOnceTheSlotMovesOn) {
  Poisoned p;
  Request& r = p.r;
  r.record.store(PackRecord(kGen + 1, Code::kInProgress));
  EXPECT_EQ(r.PoisonedOutcome(kGen), Code::kNotFound);
}

// DeregisterMemory's wait on one slot (AwaitOffRegions): true while a wedged
// GPU may still move the post's data, so the region's memory must stay.
constexpr uint64_t kKey = 11;  // the piece key of the region being deregistered
const std::vector<uint64_t> kKeys{kKey};

struct PoisonedOnRegion : Poisoned {
  PoisonedOnRegion() { r.local_keys = {3, kKey}; }
};

TEST(AwaitOffRegions, ASlotOffTheRegionNeverKeepsIt) {
  Poisoned p;
  p.r.local_keys = {3, 12};
  p.r.SetError(Status::Timeout("gave up"));
  EXPECT_FALSE(p.r.AwaitOffRegions(kKeys));
}

TEST(AwaitOffRegions, AnErrorOverAPoisonedPostKeepsTheRegion) {
  PoisonedOnRegion p;
  p.r.SetError(Status::Timeout("gave up"));
  EXPECT_TRUE(p.r.AwaitOffRegions(kKeys));
}

TEST(AwaitOffRegions, AFinishedPostLetsTheRegionGo) {
  PoisonedOnRegion p;
  p.r.poisoned.store(false);
  EXPECT_FALSE(p.r.AwaitOffRegions(kKeys));
}

// Asked in the instant between the lane's poison and its decision (the GPU's
// ok landed first): the post stands as ok, and the region goes.
TEST(AwaitOffRegions, WaitsForThePoisonToLift) {
  PoisonedOnRegion p;
  EXPECT_FALSE(AnsweredAfterTheLane([&] { return p.r.AwaitOffRegions(kKeys); },
                                    [&] { p.r.poisoned.store(false, std::memory_order_release); }));
}

TEST(AwaitOffRegions, WaitsForTheLanesErrorWhileUndecided) {
  PoisonedOnRegion p;
  EXPECT_TRUE(AnsweredAfterTheLane([&] { return p.r.AwaitOffRegions(kKeys); },
                                   [&] { p.r.SetError(Status::Timeout("gave up")); }));
}

// A post in flight on the region (not poisoned): waited for until its record
// is published.
TEST(AwaitOffRegions, WaitsForAPostInFlight) {
  PoisonedOnRegion p;
  p.r.poisoned.store(false);
  p.word.store(PackRecord(kGen, Code::kInProgress));
  EXPECT_FALSE(AnsweredAfterTheLane(
      [&] { return p.r.AwaitOffRegions(kKeys); },
      [&] { p.word.store(PackRecord(kGen, Code::kOk), std::memory_order_release); }));
}

// A Post looking its regions up: waited for before the record is read.
TEST(AwaitOffRegions, WaitsForAPostingLookup) {
  PoisonedOnRegion p;
  p.r.poisoned.store(false);
  p.r.posting.store(true);
  EXPECT_FALSE(AnsweredAfterTheLane([&] { return p.r.AwaitOffRegions(kKeys); },
                                    [&] { p.r.posting.store(false); }));
}

}  // namespace
}  // namespace kvlane::core
