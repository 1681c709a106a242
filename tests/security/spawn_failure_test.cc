// A server that cannot make a thread for a connection: the process (or its
// cgroup: pids.max, systemd's TasksMax) is at its thread limit, which an
// unauthenticated flood of connections (up to ConnSet::kMaxConns per server,
// a thread each) can bring about. The connection is refused and the server
// goes on serving; the process does not end (an exception out of the accept
// thread was std::terminate).
//
// Fault injection by symbol interposition (this executable only, not built
// under the sanitizers, which interpose pthread_create themselves):
// pthread_create fails with EAGAIN, as at the limit, while `g_no_threads` is set.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <pthread.h>

#include <atomic>
#include <cerrno>
#include <chrono>

#include "raw_peer.h"
#include "test_util.h"

namespace {
std::atomic<bool> g_no_threads{false};
}  // namespace

extern "C" int pthread_create(pthread_t* t, const pthread_attr_t* attr, void* (*fn)(void*),
                              void* arg) {
  using Fn = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
  static Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "pthread_create"));
  if (g_no_threads.load()) return EAGAIN;
  return real(t, attr, fn, arg);
}

namespace kvlane::test {
namespace {

using namespace std::chrono_literals;

// Makes every pthread_create fail until destroyed.
class NoThreads {
 public:
  NoThreads() { g_no_threads = true; }
  ~NoThreads() { g_no_threads = false; }
};

class SpawnFailureTest : public ::testing::TestWithParam<std::string> {};

TEST_P(SpawnFailureTest, ConnectionIsRefusedAndTheServerGoesOn) {
  auto t = Agent::Create(OptionsFor("target", GetParam()));
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  const TargetInfo info = Inspect(t.value()->ExportMetadata().value());
  {
    NoThreads none;
    auto p = RawPeer::Connect(GetParam(), info.meta);
    ASSERT_TRUE(p.has_value());
    EXPECT_TRUE(p->ClosedWithin(3s)) << "a connection without a thread must be closed";
  }
  // Threads again: the next connection is served (challenge, Hello accepted).
  auto p = RawPeer::Connect(GetParam(), info.meta);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->Hello(info.meta.agent_id, info.meta.secret).value_or(-100), 0);
}

INSTANTIATE_TEST_SUITE_P(Stream, SpawnFailureTest, ::testing::Values("tcp", "shm"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace kvlane::test
