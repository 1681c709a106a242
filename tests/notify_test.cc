// Notifications: data-coupled ones (carried by a transfer) reach the target
// only after the data is visible there; standalone ones arrive intact, in order.
#include <gtest/gtest.h>

#include <chrono>

#include "test_util.h"
#include "two_agents.h"

namespace kvlane::test {
namespace {

using namespace std::chrono_literals;

class NotifyTest : public TwoAgents {
 protected:
  void SetUp() override {
    AgentOptions o;
    o.chunk_bytes = 256 << 10;
    o.stripe_min_bytes = 1 << 20;  // 4 MiB requests stripe over both lanes
    MakeAgents(o);
  }
};

// Each epoch writes 4 MiB (16 chunks, striped) carrying "epoch-N". The moment b
// sees the notification, b's memory must already hold epoch N's bytes.
TEST_P(NotifyTest, DataIsVisibleWhenWriteNotificationArrives) {
  constexpr uint64_t kSize = 4 << 20;
  auto& src = bufs_.Make(kSize);
  auto& dst = bufs_.Make(kSize, 0);
  ASSERT_TRUE(a().RegisterMemory(src.data(), kSize).ok());
  ASSERT_TRUE(b().RegisterMemory(dst.data(), kSize).ok());
  Connect(a(), b());
  for (uint64_t epoch = 1; epoch <= 20; ++epoch) {
    std::string tag = "epoch-" + std::to_string(epoch);
    auto h = MakeSimple(a(), "b", Op::kWrite, src.data(), dst.data(), kSize, tag);
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    Fill(src, epoch);
    ASSERT_FALSE(a().Post(&h.value()).is_error());
    std::vector<Notification> got = TakeAtLeast(b(), 1, 10s);  // concurrent with the lanes
    ASSERT_EQ(got.size(), 1u) << "epoch " << epoch;
    EXPECT_EQ(got[0].bytes, tag);
    EXPECT_EQ(got[0].peer, "a");
    ASSERT_EQ(FirstMismatch(dst.data(), kSize, epoch), -1) << "notification before data, epoch " << epoch;
    ASSERT_TRUE(a().Wait(h.value(), 10s).ok());
    ASSERT_TRUE(a().Release(&h.value()).ok());
  }
}

// A READ's notification tells the target its bytes were pulled: by the time it
// arrives the initiator holds them.
TEST_P(NotifyTest, ReadNotificationArrivesAfterRead) {
  constexpr uint64_t kSize = 2 << 20;
  auto& back = bufs_.Make(kSize, 0);
  auto& remote = bufs_.Make(kSize);
  Fill(remote, 42);
  ASSERT_TRUE(a().RegisterMemory(back.data(), kSize).ok());
  ASSERT_TRUE(b().RegisterMemory(remote.data(), kSize).ok());
  Connect(a(), b());
  auto h = MakeSimple(a(), "b", Op::kRead, back.data(), remote.data(), kSize, "pulled");
  ASSERT_TRUE(h.ok());
  ASSERT_FALSE(a().Post(&h.value()).is_error());
  auto got = TakeAtLeast(b(), 1, 10s);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].bytes, "pulled");
  ASSERT_TRUE(a().Wait(h.value(), 10s).ok());
  EXPECT_EQ(FirstMismatch(back.data(), kSize, 42), -1);
}

// Standalone notifications: binary bytes (NULs included), up to 64 KiB, in the
// order sent; one byte more is refused.
TEST_P(NotifyTest, StandaloneNotificationsArriveInOrder) {
  std::vector<std::string> sent;
  for (int i = 0; i < 100; ++i) sent.push_back(std::string("n\0", 2) + std::to_string(i));
  sent.push_back(std::string(64 << 10, 'x'));
  for (const auto& s : sent) ASSERT_TRUE(a().SendNotification("b", s).ok());
  auto got = TakeAtLeast(b(), sent.size(), 10s);
  ASSERT_EQ(got.size(), sent.size());
  for (size_t i = 0; i < sent.size(); ++i) {
    EXPECT_EQ(got[i].bytes, sent[i]) << i;
    EXPECT_EQ(got[i].peer, "a");
  }
  EXPECT_EQ(a().SendNotification("b", std::string((64 << 10) + 1, 'x')).code(), Code::kInvalidArgument);
  EXPECT_TRUE(b().TakeNotifications().empty());  // taken once, gone
}

// A standalone notification sent after a WRITE finished finds the data there.
TEST_P(NotifyTest, StandaloneNotificationAfterFinishedWrite) {
  constexpr uint64_t kSize = 1 << 20;
  auto& src = bufs_.Make(kSize);
  auto& dst = bufs_.Make(kSize, 0);
  Fill(src, 9);
  ASSERT_TRUE(a().RegisterMemory(src.data(), kSize).ok());
  ASSERT_TRUE(b().RegisterMemory(dst.data(), kSize).ok());
  Connect(a(), b());
  auto h = MakeSimple(a(), "b", Op::kWrite, src.data(), dst.data(), kSize);
  ASSERT_TRUE(h.ok());
  ASSERT_TRUE(PostAndWait(a(), &h.value()).ok());
  ASSERT_TRUE(a().SendNotification("b", "done").ok());
  auto got = TakeAtLeast(b(), 1, 10s);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].bytes, "done");
  EXPECT_EQ(FirstMismatch(dst.data(), kSize, 9), -1);
}

// Untaken notifications are bounded: past max_notification_bytes the target
// refuses (the sender sees kNotAllowed, nothing is dropped silently); a transfer
// whose notification is refused ends with kNotAllowed though its data landed;
// once the application takes them, notifications flow again.
TEST_P(NotifyTest, UntakenNotificationsAreBounded) {
  AgentOptions o;
  o.max_notification_bytes = 8192;
  o.max_notification_bytes_per_peer = 8192;  // one peer may fill it all
  ASSERT_NO_FATAL_FAILURE(MakeAgents(o, /*connect=*/false));
  constexpr uint64_t kSize = 64 << 10;
  auto& src = bufs_.Make(kSize);
  auto& dst = bufs_.Make(kSize, 0);
  Fill(src, 4);
  ASSERT_TRUE(a().RegisterMemory(src.data(), kSize).ok());
  ASSERT_TRUE(b().RegisterMemory(dst.data(), kSize).ok());
  Connect(a(), b());
  // Costs 1024 (the payload's heap block: 1001 bytes rounded up to 16, + 16) + 1
  // ("a") + 72 bytes at b, and the first another 128 + 1 for "a": seven fit 8192
  // bytes, eight do not.
  const std::string msg(1000, 'm');
  for (int i = 0; i < 7; ++i) ASSERT_TRUE(a().SendNotification("b", msg).ok()) << i;
  EXPECT_EQ(a().SendNotification("b", msg).code(), Code::kNotAllowed);
  auto h = MakeSimple(a(), "b", Op::kWrite, src.data(), dst.data(), kSize, msg);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(PostAndWait(a(), &h.value()).code(), Code::kNotAllowed);
  EXPECT_EQ(FirstMismatch(dst.data(), kSize, 4), -1);  // the data landed before the notification
  EXPECT_EQ(b().TakeNotifications().size(), 7u);
  ASSERT_TRUE(a().SendNotification("b", msg).ok());
  EXPECT_TRUE(PostAndWait(a(), &h.value()).ok());
  EXPECT_EQ(b().TakeNotifications().size(), 2u);
  EXPECT_TRUE(a().PeerError("b").ok());  // a refusal does not latch the channel
}

// One peer cannot crowd the others out: past its share (max_notification_bytes_per_peer)
// its notifications are refused, naming that limit, while another peer's still
// fit; once the application takes them, the share is free again.
TEST_P(NotifyTest, PeerThatFloodsIsRefusedAtItsShare) {
  AgentOptions o;
  o.max_notification_bytes = 8192;
  o.max_notification_bytes_per_peer = 3500;
  ASSERT_NO_FATAL_FAILURE(MakeAgents(o));
  o.name = "c";
  o.transports = {GetParam()};
  auto c = Agent::Create(o);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  Connect(**c, b());
  // Costs 1024 + 1 + 72 bytes at b (1024: the payload's heap block), and a name's
  // first another 128 + 1: three fit a share (3420 bytes), four do not.
  const std::string msg(1000, 'm');
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(a().SendNotification("b", msg).ok()) << i;
  Status refused = a().SendNotification("b", msg);
  EXPECT_EQ(refused.code(), Code::kNotAllowed);
  EXPECT_NE(refused.message().find("max_notification_bytes_per_peer"), std::string::npos)
      << refused.ToString();
  ASSERT_TRUE((*c)->SendNotification("b", msg).ok());  // b holds 4646 of 8192 bytes
  auto got = b().TakeNotifications();
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[3].peer, "c");
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(a().SendNotification("b", msg).ok()) << i;
  EXPECT_TRUE(a().PeerError("b").ok());  // a refusal does not latch the channel
}

// By default a peer's share is a quarter of max_notification_bytes.
TEST_P(NotifyTest, PeerShareDefaultsToAQuarter) {
  AgentOptions o;
  o.max_notification_bytes = 1 << 20;
  ASSERT_NO_FATAL_FAILURE(MakeAgents(o));
  const std::string msg(64 << 10, 'm');  // 65,641 bytes each: three fit 256 KiB, four do not
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(a().SendNotification("b", msg).ok()) << i;
  EXPECT_EQ(a().SendNotification("b", msg).code(), Code::kNotAllowed);
  EXPECT_EQ(b().TakeNotifications().size(), 3u);
  EXPECT_TRUE(a().SendNotification("b", msg).ok());
}

// A small bound's quarter would refuse the largest notification (64 KiB) even
// from an empty queue: the default share is then at least what it costs.
TEST_P(NotifyTest, LargestNotificationFitsTheDefaultShare) {
  AgentOptions o;
  o.max_notification_bytes = 128 << 10;  // a quarter: 32 KiB
  ASSERT_NO_FATAL_FAILURE(MakeAgents(o));
  const std::string msg(64 << 10, 'm');
  Status s = a().SendNotification("b", msg);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(b().TakeNotifications().size(), 1u);
}

INSTANTIATE_TEST_SUITE_P(Transports, NotifyTest, ::testing::Values("local", "shm", "tcp"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace kvlane::test
