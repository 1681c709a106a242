// What a server thread calls for a remote peer, under allocation failure: each
// allocation the call makes is failed in turn (this binary replaces the global
// operator new to do it). PeerConnLimit::Acquire neither throws nor leaves a
// count behind, so the peer's slots stay free; NotifQueue::Push neither throws
// nor queues or charges anything, so the bounds still hold every byte.
#include <gtest/gtest.h>

#include <cstdlib>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "transport/notif_queue.h"
#include "transport/peer_conn_limit.h"

namespace {

// The allocation on this thread that fails next: 0 the next one, -1 none.
thread_local int fail_countdown = -1;

void* Allocate(std::size_t n) {
  if (fail_countdown >= 0 && fail_countdown-- == 0) throw std::bad_alloc();
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}

}  // namespace

// Every form a sanitizer's runtime would otherwise pair with its own allocator.
void* operator new(std::size_t n) { return Allocate(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return Allocate(n);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }

namespace kvlane::core {
namespace {

// The `k`-th allocation of this thread from now fails (once) until destroyed.
class FailAllocation {
 public:
  explicit FailAllocation(int k) { fail_countdown = k; }
  ~FailAllocation() { fail_countdown = -1; }
  // Whether the failure was injected.
  bool fired() const { return fail_countdown == -1; }
};

TEST(PeerConnLimitAlloc, AllocationFailureNeitherThrowsNorLeaksACount) {
  const std::string peer(64, 'p');  // past the string's own buffer: copies allocate
  bool completed = false;
  for (int k = 0; !completed && k < 100; ++k) {
    PeerConnLimit limit(1);
    std::optional<Result<PeerConnLimit::Slot>> got;
    bool fired = false;
    {
      FailAllocation fail(k);
      try {
        got.emplace(limit.Acquire(peer));
      } catch (const std::bad_alloc&) {
        ADD_FAILURE() << "allocation " << k << " of Acquire threw";
      }
      fired = fail.fired();
    }
    completed = !fired;
    if (completed) {
      ASSERT_TRUE(got.has_value() && got->ok()) << k;
      continue;
    }
    if (got.has_value()) EXPECT_EQ(got->status().code(), Code::kBackend) << k;
    Result<PeerConnLimit::Slot> again = limit.Acquire(peer);  // the peer's one slot is free
    EXPECT_TRUE(again.ok()) << "allocation " << k << ": " << again.status().ToString();
  }
  EXPECT_TRUE(completed);
}

// Fills `q` with notifications from distinct names of 40 bytes (past the
// string's own buffer) until one is refused; returns how many fit.
int FillUntilRefused(NotifQueue& q) {
  for (int i = 0;; ++i) {
    if (!q.Push({std::string(40, 'a' + i % 26) + std::to_string(i), "x"}).ok()) return i;
  }
}

TEST(NotifQueueAlloc, AllocationFailureNeitherThrowsNorQueuesNorCharges) {
  constexpr uint64_t kMax = 4096;
  const Notification held{"first-peer-name-past-the-small-buffer", "x"};
  int room = 0;  // how many fit beside `held` in a queue that saw no failure
  {
    NotifQueue q(kMax, kMax);
    ASSERT_TRUE(q.Push(held).ok());
    room = FillUntilRefused(q);
  }
  ASSERT_GT(room, 2);
  bool completed = false;
  for (int k = 0; !completed && k < 100; ++k) {
    NotifQueue q(kMax, kMax);
    ASSERT_TRUE(q.Push(held).ok());
    Notification fresh{std::string(40, 'n'), std::string(100, 'p')};  // made before the failure
    std::optional<Status> got;
    bool fired = false;
    {
      FailAllocation fail(k);
      try {
        got.emplace(q.Push(std::move(fresh)));
      } catch (const std::bad_alloc&) {
        ADD_FAILURE() << "allocation " << k << " of Push threw";
      }
      fired = fail.fired();
    }
    completed = !fired;
    if (completed) {
      ASSERT_TRUE(got.has_value() && got->ok()) << k;
      continue;
    }
    if (got.has_value()) EXPECT_EQ(got->code(), Code::kBackend) << k;
    // Nothing of the failed push stayed: `held` alone is queued, and as many
    // more fit as beside it in a queue that saw no failure (no charge left).
    EXPECT_EQ(FillUntilRefused(q), room) << "allocation " << k << " left a charge";
    std::vector<Notification> all = q.TakeAll();
    ASSERT_FALSE(all.empty());
    EXPECT_EQ(all.front().peer, held.peer) << "allocation " << k << " queued something";
  }
  EXPECT_TRUE(completed);
}

}  // namespace
}  // namespace kvlane::core
