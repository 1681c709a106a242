// Burst::Run's end when its requests do not all end in time, against a stand-in for
// the engine (TransferOps): a timeout or a stop cancels the requests no lane has
// started, waits a bounded grace for the started ones, and says how many still run;
// the burst never blocks past that bound, not even when it is released.
#include "burst.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

namespace kvbench {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr milliseconds kNever{3600 * 1000};

// Request i ends `ends_after` after its post, unless it is `queued`: no lane ever
// takes it, and only a cancel ends it (kCanceled). A started request cannot be
// canceled nor released while it runs (kNotAllowed), as with the engine.
class FakeTransfers final : public TransferOps {
 public:
  struct Request {
    milliseconds ends_after = kNever;
    bool queued = false;
    Clock::time_point posted{};
    bool canceled = false;
    bool released = false;
  };
  explicit FakeTransfers(std::vector<Request> requests) : r_(std::move(requests)) {}

  std::vector<kvlane::XferHandle> Handles() const {
    std::vector<kvlane::XferHandle> h;
    for (uint32_t i = 0; i < r_.size(); ++i) h.push_back({i, 0});
    return h;
  }
  const Request& at(size_t i) const { return r_[i]; }

  kvlane::Status Post(kvlane::XferHandle* h) override {
    r_[h->slot].posted = Clock::now();
    return kvlane::Status::InProgress();
  }
  kvlane::Status Check(const kvlane::XferHandle& h) const override {
    const Request& r = r_[h.slot];
    if (r.canceled) return kvlane::Status::Canceled("canceled");
    if (!r.queued && Clock::now() >= r.posted + r.ends_after) return kvlane::Status::Ok();
    return kvlane::Status::InProgress();
  }
  kvlane::Status Wait(const kvlane::XferHandle& h, std::chrono::nanoseconds t) const override {
    const Clock::time_point deadline = Clock::now() + std::min<std::chrono::nanoseconds>(t, kNever);
    while (Check(h).in_progress()) {
      if (Clock::now() >= deadline) return kvlane::Status::Timeout("wait timed out");
      std::this_thread::sleep_for(milliseconds(1));
    }
    return Check(h);
  }
  kvlane::Status Cancel(const kvlane::XferHandle& h) override {
    if (!Check(h).in_progress()) return kvlane::Status::Ok();
    if (!r_[h.slot].queued) return kvlane::Status::NotAllowed("a lane owns it");
    r_[h.slot].canceled = true;
    return kvlane::Status::Ok();
  }
  kvlane::Status Release(kvlane::XferHandle* h) override {
    KVLANE_RETURN_IF_ERROR(Cancel(*h));
    r_[h->slot].released = true;
    return kvlane::Status::Ok();
  }

 private:
  std::vector<Request> r_;
};

double MsSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// A request a lane holds for good, one no lane takes and one that ends at once: the
// timeout cancels the queued one, gives the held one the grace, and the burst ends,
// released too, within timeout + grace, naming the timeout and what still runs.
TEST(Burst, ATimeoutEndsWithinTheTimeoutAndTheGrace) {
  FakeTransfers fake({{kNever}, {kNever, true}, {milliseconds(0)}});
  const Clock::time_point t0 = Clock::now();
  BurstTiming t;
  {
    Burst b = Burst::Over(&fake, fake.Handles(), milliseconds(100));
    t = b.Run(milliseconds(50));
  }
  EXPECT_LT(MsSince(t0), 1000);
  EXPECT_EQ(t.status.code(), kvlane::Code::kTimeout) << t.status.ToString();
  EXPECT_NE(t.status.message().find("control timeout (50 ms)"), std::string::npos)
      << t.status.message();
  EXPECT_NE(t.status.message().find("1 still running"), std::string::npos) << t.status.message();
  EXPECT_FALSE(t.abandoned);
  EXPECT_EQ(t.still_running, 1u);
  EXPECT_TRUE(fake.at(1).canceled);
  EXPECT_FALSE(fake.at(0).released);  // a lane holds it: left to the agent, not freed
  EXPECT_TRUE(fake.at(2).released);
}

// Many requests a lane holds: the grace is one bound for the burst, not one per request.
TEST(Burst, TheGraceIsPerBurstNotPerRequest) {
  FakeTransfers fake(std::vector<FakeTransfers::Request>(8, {kNever}));
  const Clock::time_point t0 = Clock::now();
  BurstTiming t;
  {
    Burst b = Burst::Over(&fake, fake.Handles(), milliseconds(100));
    t = b.Run(milliseconds(20));
  }
  EXPECT_LT(MsSince(t0), 1000);
  EXPECT_EQ(t.still_running, 8u);
}

// Started requests that end within the grace: the burst fails on its timeout, but
// nothing runs any more and every request is released.
TEST(Burst, RequestsThatEndInTheGraceLeaveNothingRunning) {
  FakeTransfers fake({{milliseconds(150)}, {kNever, true}});
  BurstTiming t;
  {
    Burst b = Burst::Over(&fake, fake.Handles(), milliseconds(5000));
    t = b.Run(milliseconds(20));
  }
  EXPECT_EQ(t.status.code(), kvlane::Code::kTimeout);
  EXPECT_NE(t.status.message().find("0 still running"), std::string::npos) << t.status.message();
  EXPECT_EQ(t.still_running, 0u);
  EXPECT_LT(t.total_ms, 1000);
  EXPECT_TRUE(fake.at(0).released);
  EXPECT_TRUE(fake.at(1).released);
}

// A stop: the queued request is canceled, the started one waited for; kCanceled.
TEST(Burst, AStopCancelsTheQueuedAndWaitsForTheStarted) {
  FakeTransfers fake({{milliseconds(60)}, {kNever, true}});
  Burst b = Burst::Over(&fake, fake.Handles(), milliseconds(100));
  const BurstTiming t = b.Run(milliseconds(10000), [] { return true; });
  EXPECT_TRUE(t.abandoned);
  EXPECT_EQ(t.status.code(), kvlane::Code::kCanceled) << t.status.ToString();
  EXPECT_EQ(t.still_running, 0u);
  EXPECT_TRUE(fake.at(1).canceled);
  EXPECT_LT(t.total_ms, 1000);
}

// A stop whose started request outlives the timeout and the grace: bounded as well.
TEST(Burst, AStopEndsWithinTheTimeoutAndTheGrace) {
  FakeTransfers fake({{kNever}});
  const Clock::time_point t0 = Clock::now();
  BurstTiming t;
  {
    Burst b = Burst::Over(&fake, fake.Handles(), milliseconds(50));
    t = b.Run(milliseconds(50), [] { return true; });
  }
  EXPECT_LT(MsSince(t0), 1000);
  EXPECT_TRUE(t.abandoned);
  EXPECT_EQ(t.status.code(), kvlane::Code::kTimeout) << t.status.ToString();
  EXPECT_EQ(t.still_running, 1u);
}

// The burst's keep-alive is called through the grace too, when the stop is no longer
// asked: a lane holds the request through the whole 3 s grace, and the peer waiting
// for this rank still hears from it at least every 1 s (it is called about every
// kStopEvery). The bounds leave room for a stall of a loaded machine and are a third
// of the grace: a keep-alive that ends with the timeout, or a stop still asked
// through the grace, still shows.
TEST(Burst, TheKeepAliveIsCalledThroughTheGrace) {
  FakeTransfers fake({{kNever}});
  std::vector<double> calls;  // ms since the first post
  int asked_after_timeout = 0;
  const Clock::time_point t0 = Clock::now();
  Burst b = Burst::Over(&fake, fake.Handles(), milliseconds(3000));
  const BurstTiming t = b.Run(
      milliseconds(50),
      [&] {
        if (MsSince(t0) > 1000) ++asked_after_timeout;  // timed out at 50 ms
        return false;
      },
      [&] { calls.push_back(MsSince(t0)); });
  EXPECT_EQ(t.status.code(), kvlane::Code::kTimeout) << t.status.ToString();
  EXPECT_EQ(t.still_running, 1u);
  EXPECT_EQ(asked_after_timeout, 0);
  ASSERT_FALSE(calls.empty());
  EXPECT_GT(calls.back(), t.total_ms - 1000) << calls.size() << " calls";
  double widest = calls.front();
  for (size_t i = 1; i < calls.size(); ++i) widest = std::max(widest, calls[i] - calls[i - 1]);
  EXPECT_LT(widest, 1000) << calls.size() << " calls";
}

// Requests that end in time: timed, all released.
TEST(Burst, RequestsThatEndInTimeAreTimed) {
  FakeTransfers fake({{milliseconds(5)}, {milliseconds(10)}});
  {
    Burst b = Burst::Over(&fake, fake.Handles(), milliseconds(100));
    const BurstTiming t = b.Run(milliseconds(5000));
    EXPECT_TRUE(t.status.ok()) << t.status.ToString();
    EXPECT_EQ(t.still_running, 0u);
    ASSERT_EQ(t.request_ms.size(), 2u);
    EXPECT_GE(t.request_ms[1], 10);
    EXPECT_GE(t.total_ms, t.request_ms[1]);
  }
  EXPECT_TRUE(fake.at(0).released && fake.at(1).released);
}

}  // namespace
}  // namespace kvbench
