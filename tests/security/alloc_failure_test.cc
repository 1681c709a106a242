// What a server thread calls for a remote peer, under allocation failure: each
// allocation the call makes is failed in turn (this binary replaces the global
// operator new to do it). PeerConnLimit::Acquire neither throws nor leaves a
// count behind, so the peer's slots stay free; NotifQueue::Push neither throws
// nor queues or charges anything. A server thread that runs out of memory
// drops its connection, not the process.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "test_util.h"
#include "transport/notif_queue.h"
#include "transport/peer_conn_limit.h"

namespace {

// The allocation on this thread that fails next: 0 the next one, -1 none.
thread_local int fail_countdown = -1;
// Every allocation of at least this many bytes fails, on every thread but the
// ones marked spared.
std::atomic<std::size_t> fail_at_least{SIZE_MAX};
thread_local bool spared = false;

void* Allocate(std::size_t n) {
  if (fail_countdown >= 0 && fail_countdown-- == 0) throw std::bad_alloc();
  if (!spared && n >= fail_at_least.load(std::memory_order_relaxed)) throw std::bad_alloc();
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

// What one call returned with this thread's `k`-th allocation failing (empty,
// and a test failure, when it threw), and whether that allocation came.
template <typename Call>
struct FailedCall {
  std::optional<std::invoke_result_t<Call>> result;
  bool fired = false;
};

template <typename Call>
FailedCall<Call> CallFailingAllocation(int k, Call call) {
  FailedCall<Call> out;
  FailAllocation fail(k);
  try {
    out.result.emplace(call());
  } catch (const std::bad_alloc&) {
    ADD_FAILURE() << "allocation " << k << " threw out of the call";
  }
  out.fired = fail.fired();
  return out;
}

TEST(PeerConnLimitAlloc, AllocationFailureNeitherThrowsNorLeaksACount) {
  const std::string peer(64, 'p');  // past the string's own buffer: copies allocate
  bool completed = false;
  for (int k = 0; !completed && k < 100; ++k) {
    PeerConnLimit limit(1);
    auto [got, fired] = CallFailingAllocation(k, [&] { return limit.Acquire(peer); });
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

// A queue holding `n` notifications, each from its own name.
void Prefill(NotifQueue& q, int n) {
  for (int i = 0; i < n; ++i)
    ASSERT_TRUE(q.Push({"held-peer-name-past-the-small-buffer-" + std::to_string(i), "x"}).ok());
}

// Each allocation of one Push failed in turn, into a queue that holds `prefill`
// notifications: 0 and 16 make the queue's vector grow inside the Push (its
// first room, then doubling), 1 does not.
void PushFailingEachAllocation(int prefill) {
  SCOPED_TRACE("prefill " + std::to_string(prefill));
  constexpr uint64_t kMax = 8192;
  const std::string fresh_name(40, 'n');  // no name FillUntilRefused uses
  int room = 0;  // how many fit after the prefill in a queue that saw no failure
  {
    NotifQueue q(kMax, kMax);
    Prefill(q, prefill);
    room = FillUntilRefused(q);
  }
  ASSERT_GT(room, 2);
  bool completed = false;
  for (int k = 0; !completed && k < 100; ++k) {
    NotifQueue q(kMax, kMax);
    Prefill(q, prefill);
    Notification fresh{fresh_name, std::string(100, 'p')};  // made before the failure
    auto [got, fired] = CallFailingAllocation(k, [&] { return q.Push(std::move(fresh)); });
    completed = !fired;
    if (completed) {
      ASSERT_TRUE(got.has_value() && got->ok()) << k;
      continue;
    }
    if (got.has_value()) EXPECT_EQ(got->code(), Code::kBackend) << k;
    // Nothing of the failed push stayed: as many more fit as in a queue that
    // saw no failure (no charge left), and the failed one is not among them.
    EXPECT_EQ(FillUntilRefused(q), room) << "allocation " << k << " left a charge";
    std::vector<Notification> all = q.TakeAll();
    EXPECT_EQ(all.size(), static_cast<size_t>(prefill + room)) << "allocation " << k;
    for (const Notification& n : all)
      EXPECT_NE(n.peer, fresh_name) << "allocation " << k << " queued the failed push";
  }
  EXPECT_TRUE(completed);
}

TEST(NotifQueueAlloc, AllocationFailureNeitherThrowsNorQueuesNorCharges) {
  for (int prefill : {0, 1, 16}) PushFailingEachAllocation(prefill);
}

// While alive, every allocation of at least `bytes` fails, on every thread but
// the one that made it (the test's, which sends: only the target's server
// threads are meant to fail).
class FailLargeAllocations {
 public:
  explicit FailLargeAllocations(std::size_t bytes) {
    spared = true;
    fail_at_least = bytes;
  }
  ~FailLargeAllocations() {
    fail_at_least = SIZE_MAX;
    spared = false;
  }
};

// A server thread that runs out of memory (here: the 64 KiB buffer for a
// notification's payload) drops that connection; the process, and its serving
// of other peers, goes on. Before, the bad_alloc ended the process.
TEST(ServerAlloc, OutOfMemoryOnAServerThreadDropsTheConnectionNotTheProcess) {
  for (const char* transport : {"tcp", "shm"}) {
    SCOPED_TRACE(transport);
    test::Pair p = test::MakePair(transport);
    ASSERT_TRUE(p.a && p.b);
    test::Connect(*p.a, *p.b);
    const std::string big(kMaxNotifyBytes, 'x');  // made before the failures start
    Status s;
    {
      FailLargeAllocations fail(kMaxNotifyBytes - 1024);
      s = p.a->SendNotification("b", big);
    }
    EXPECT_FALSE(s.ok()) << "the payload's buffer could not be allocated";
    // b still serves: another agent's notification arrives.
    AgentOptions o = test::OptionsFor("c", transport);
    auto c = Agent::Create(o);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    test::Connect(**c, *p.b);
    ASSERT_TRUE((*c)->SendNotification("b", big).ok());
    std::vector<Notification> got = test::TakeAtLeast(*p.b, 1, std::chrono::seconds(5));
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].peer, "c");
    EXPECT_EQ(got[0].bytes, big);
  }
}

}  // namespace
}  // namespace kvlane::core
