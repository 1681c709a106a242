// The process's cap on device-staging copiers (core/staging_quota.h): in all,
// and per peer name, so one peer's connections cannot take every pinned
// buffer; and MakeDeviceCopier holding a place for each copier it makes.
#include "core/staging_quota.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "core/device_copier.h"
#include "fake_copier.h"

namespace kvlane::core {
namespace {

std::vector<StagingQuota::Ticket> TakeAll(StagingQuota& q, const std::string& holder, int n) {
  std::vector<StagingQuota::Ticket> got;
  for (int i = 0; i < n; ++i) {
    auto t = q.Take(holder);
    EXPECT_TRUE(t.ok()) << holder << " #" << i << ": " << t.status().ToString();
    if (t.ok()) got.push_back(std::move(t).value());
  }
  return got;
}

// One peer's connections stop at the peer cap; another peer and this
// process's own lanes still get buffers.
TEST(StagingQuota, OnePeerCannotTakeMoreThanItsCap) {
  StagingQuota q(10, 3);
  auto a = TakeAll(q, "a", 3);
  auto refused = q.Take("a");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Code::kNotAllowed);
  EXPECT_NE(refused.status().message().find("peer 'a'"), std::string::npos)
      << refused.status().message();
  auto b = TakeAll(q, "b", 3);
  auto own = TakeAll(q, "", 4);  // not capped per holder
  EXPECT_EQ(q.alive(), 10);
  EXPECT_EQ(q.alive("a"), 3);
  EXPECT_EQ(q.alive("b"), 3);
}

// The process cap holds whoever asks, and a ticket given back frees a place
// for its holder and for the process.
TEST(StagingQuota, TheProcessCapHoldsForEveryoneAndPlacesComeBack) {
  StagingQuota q(4, 3);
  auto a = TakeAll(q, "a", 2);
  auto own = TakeAll(q, "", 2);
  for (const char* who : {"a", "b", ""}) {
    auto t = q.Take(who);
    ASSERT_FALSE(t.ok()) << who;
    EXPECT_EQ(t.status().code(), Code::kNotAllowed);
    EXPECT_NE(t.status().message().find("in this process"), std::string::npos);
  }
  a.pop_back();
  EXPECT_EQ(q.alive(), 3);
  EXPECT_EQ(q.alive("a"), 1);
  auto b = q.Take("b");
  EXPECT_TRUE(b.ok());
  EXPECT_EQ(q.alive("b"), 1);
}

// A moved-from ticket gives back nothing; one assigned over gives back its own.
TEST(StagingQuota, TicketsGiveBackTheirPlaceOnce) {
  StagingQuota q(8, 8);
  {
    auto t = q.Take("a");
    ASSERT_TRUE(t.ok());
    StagingQuota::Ticket first = std::move(t).value();
    StagingQuota::Ticket second = std::move(first);
    EXPECT_EQ(q.alive("a"), 1);
    auto u = q.Take("b");
    ASSERT_TRUE(u.ok());
    second = std::move(u).value();  // a's place given back, b's held
    EXPECT_EQ(q.alive("a"), 0);
    EXPECT_EQ(q.alive("b"), 1);
    EXPECT_EQ(q.alive(), 1);
  }
  EXPECT_EQ(q.alive(), 0);
  EXPECT_EQ(q.alive("b"), 0);
}

// A copier's place is given back only after its own destructor ran (its
// buffers freed): while it runs, the quota still counts it.
TEST(StagingQuota, ACopiersPlaceComesBackAfterItsBuffersAreFreed) {
  // A copier that moves nothing and records what the quota counts as it goes.
  struct Watched final : DeviceCopier {
    explicit Watched(int* seen) : seen_(seen) {}
    ~Watched() override { *seen_ = ProcessStagingQuota().alive(); }
    size_t capacity() const override { return 0; }
    uint8_t* half(int) override { return nullptr; }
    Status ToHost(int, size_t, const void*, size_t) override { return Status::Ok(); }
    Status ToDevice(int, size_t, void*, size_t) override { return Status::Ok(); }
    Status Flush(int) override { return Status::Ok(); }
    Status Wait(int) override { return Status::Ok(); }
    int* seen_;
  };
  struct Staging final : DeviceStaging {
    Result<std::unique_ptr<DeviceCopier>> MakeCopier(const void*, StagingCopy) override {
      return std::unique_ptr<DeviceCopier>(new Watched(&seen));
    }
    int seen = -1;
  } staging;
  SetDeviceStagingForTest(&staging);
  uint8_t byte = 0;
  {
    auto c = MakeDeviceCopier(&byte, StagingCopy::kBatch, "peer");
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    EXPECT_EQ(ProcessStagingQuota().alive(), 1);
  }
  EXPECT_EQ(staging.seen, 1);  // still counted in the copier's destructor
  EXPECT_EQ(ProcessStagingQuota().alive(), 0);
  SetDeviceStagingForTest(nullptr);
}

class MakeDeviceCopierTest : public ::testing::Test {
 protected:
  void SetUp() override { SetDeviceStagingForTest(&staging_); }
  void TearDown() override { SetDeviceStagingForTest(nullptr); }
  test::FakeStaging staging_;
  uint8_t device_byte_ = 0;  // what `first` points at
};

// Copiers made for one peer's connections stop at kMaxStagingCopiersPerPeer
// (kNotAllowed, before any buffer is made); one destroyed frees a place; this
// process's lanes and another peer are not held up.
TEST_F(MakeDeviceCopierTest, APeersConnectionsStopAtThePeerCap) {
  std::vector<std::unique_ptr<DeviceCopier>> held;
  for (int i = 0; i < kMaxStagingCopiersPerPeer; ++i) {
    auto c = MakeDeviceCopier(&device_byte_, StagingCopy::kBatch, "greedy");
    ASSERT_TRUE(c.ok()) << i << ": " << c.status().ToString();
    held.push_back(std::move(c).value());
  }
  const uint64_t made = staging_.counters.copiers;
  auto refused = MakeDeviceCopier(&device_byte_, StagingCopy::kBatch, "greedy");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Code::kNotAllowed);
  EXPECT_EQ(staging_.counters.copiers, made);  // refused before a buffer was made
  EXPECT_TRUE(MakeDeviceCopier(&device_byte_, StagingCopy::kBatch, "other").ok());
  EXPECT_TRUE(MakeDeviceCopier(&device_byte_, StagingCopy::kBatch, "").ok());
  held.pop_back();
  EXPECT_TRUE(MakeDeviceCopier(&device_byte_, StagingCopy::kBatch, "greedy").ok());
  held.clear();
  EXPECT_EQ(ProcessStagingQuota().alive(), 0);
}

// A copier the staging fails to make gives its place back.
TEST_F(MakeDeviceCopierTest, AFailedCopierHoldsNoPlace) {
  staging_.counters.fail_make = true;
  for (int i = 0; i < kMaxStagingCopiersPerPeer + 1; ++i) {
    auto c = MakeDeviceCopier(&device_byte_, StagingCopy::kBatch, "peer");
    ASSERT_FALSE(c.ok());
    EXPECT_EQ(c.status().code(), Code::kBackend) << i;
  }
  EXPECT_EQ(ProcessStagingQuota().alive(), 0);
}

}  // namespace
}  // namespace kvlane::core
