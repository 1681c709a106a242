// NotifQueue's accounting: a sender name's first queued notification also pays
// for the name's map node, so a peer that takes a new name per notification hits
// the bounds too; a payload or name on the heap pays its block; taking the
// notifications frees every charge.
#include "transport/notif_queue.h"

#include <gtest/gtest.h>

#include <cstdio>

namespace kvlane::core {
namespace {

constexpr uint64_t kBound = 4096;

Notification Tiny(const std::string& peer) { return Notification{peer, "x"}; }

// "p0000", "p0001", ...: a name of 5 bytes each.
std::string NameOf(int i) {
  char name[8];
  std::snprintf(name, sizeof(name), "p%04d", i);
  return name;
}

// Pushes one tiny notification from each of `n` new names, until one is refused;
// how many were queued.
int PushFromNewNames(NotifQueue& q, int n, int first = 0) {
  for (int i = 0; i < n; ++i)
    if (!q.Push(Tiny(NameOf(first + i))).ok()) return i;
  return n;
}

// Each new name pays its node: the bound counts it, and taking them frees it all.
TEST(NotifQueue, NewNamesPayForTheirNodeUntilTaken) {
  NotifQueue q(kBound, kBound);
  const uint64_t one = 1 + 5 + NotifQueue::kOverheadBytes;  // payload, name, overhead
  const uint64_t name = NotifQueue::kNameOverheadBytes + 5;
  const int fit = static_cast<int>(kBound / (one + name));
  EXPECT_EQ(PushFromNewNames(q, 1000), fit);
  Status refused = q.Push(Tiny("another"));
  EXPECT_EQ(refused.code(), Code::kNotAllowed);
  EXPECT_NE(refused.message().find("max_notification_bytes ="), std::string::npos)
      << refused.ToString();
  EXPECT_EQ(q.TakeAll().size(), static_cast<size_t>(fit));
  EXPECT_EQ(PushFromNewNames(q, 1000, 5000), fit);  // every charge was freed
}

// A name already queued pays its node once: its later notifications cost less.
TEST(NotifQueue, ANameQueuedPaysItsNodeOnce) {
  NotifQueue q(kBound, kBound);
  const uint64_t one = 1 + 5 + NotifQueue::kOverheadBytes;
  const uint64_t name = NotifQueue::kNameOverheadBytes + 5;
  int fit = 0;
  while (q.Push(Tiny(NameOf(0))).ok()) ++fit;
  EXPECT_EQ(fit, static_cast<int>((kBound - name) / one));
}

// The name's charge counts against its sender's share as well: a share that
// holds exactly one notification and its name admits it, one byte less does not.
TEST(NotifQueue, ANamesFirstNotificationPaysItsNodeFromTheShare) {
  const uint64_t first = 1 + 5 + NotifQueue::kOverheadBytes + NotifQueue::kNameOverheadBytes + 5;
  NotifQueue exact(kBound, first);
  EXPECT_TRUE(exact.Push(Tiny(NameOf(0))).ok());
  NotifQueue less(kBound, first - 1);
  Status refused = less.Push(Tiny(NameOf(0)));
  EXPECT_EQ(refused.code(), Code::kNotAllowed);
  EXPECT_NE(refused.message().find("max_notification_bytes_per_peer"), std::string::npos)
      << refused.ToString();
}

// The largest and smallest costs the option checks rely on: each fits a queue
// that holds exactly that much, and is refused by one byte less.
TEST(NotifQueue, LargestAndSmallestCostsAreExact) {
  const Notification largest{std::string(kMaxPeerName, 'n'), std::string(kMaxNotifyBytes, 'b')};
  const Notification smallest{"n", ""};
  for (const auto& [n, cost] : {std::pair{largest, NotifQueue::kLargestCost},
                                std::pair{smallest, NotifQueue::kSmallestCost}}) {
    NotifQueue fits(cost, cost);
    EXPECT_TRUE(fits.Push(n).ok()) << cost;
    NotifQueue short_one(cost, cost - 1);
    EXPECT_FALSE(short_one.Push(n).ok()) << cost;
  }
}

// A payload or name past std::string's own buffer (16 bytes and more) is charged
// its heap block: length + 1 rounded up to 16, plus 16 (48 for 16 bytes); up to
// 15 bytes it is charged its length. A flood of 16-byte payloads fits the bound
// by that cost.
TEST(NotifQueue, PayloadsAndNamesOnTheHeapPayTheirBlock) {
  const uint64_t slot = NotifQueue::kOverheadBytes;
  EXPECT_EQ(NotifQueue::Cost({"n", std::string(15, 'p')}), 15 + 1 + slot);
  EXPECT_EQ(NotifQueue::Cost({"n", std::string(16, 'p')}), 48 + 1 + slot);
  EXPECT_EQ(NotifQueue::Cost({std::string(16, 'n'), std::string(31, 'p')}), 48 + 48 + slot);
  EXPECT_EQ(NotifQueue::Cost({"n", std::string(32, 'p')}), 64 + 1 + slot);
  const Notification sixteen{NameOf(0), std::string(16, 'p')};
  NotifQueue q(kBound, kBound);
  int fit = 0;
  while (q.Push(sixteen).ok()) ++fit;
  EXPECT_EQ(fit, static_cast<int>((kBound - NotifQueue::NameCost(sixteen.peer)) /
                                  (48 + 5 + NotifQueue::kOverheadBytes)));
}

}  // namespace
}  // namespace kvlane::core
