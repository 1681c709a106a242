// PeerConnLimit::Acquire under allocation failure: each allocation it makes is
// failed in turn (this binary replaces the global operator new to do it); the
// call neither throws nor leaves a count behind, so the peer's slots stay free.
#include <gtest/gtest.h>

#include <cstdlib>
#include <new>
#include <optional>
#include <string>

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

}  // namespace
}  // namespace kvlane::core
