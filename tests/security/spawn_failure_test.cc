// A server that cannot make a thread for a connection: the process (or its
// cgroup: pids.max, systemd's TasksMax) is at its thread limit, which an
// unauthenticated flood of connections (up to ConnSet::kMaxConns per server,
// a thread each) can bring about. The connection is refused and the server
// goes on serving; the process does not end (an exception out of the accept
// thread was std::terminate).
//
// A channel whose lane threads cannot all start is refused with a status (no
// exception out of the API, no hang), and the next call opens it.
//
// Fault injection by symbol interposition (this executable only, not built
// under the sanitizers, which interpose pthread_create themselves):
// pthread_create fails with EAGAIN, as at the limit, while `g_no_threads` is set,
// or on a thread whose `t_allowed` count of further threads ran out.
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
thread_local int t_allowed = -1;  // this thread's further pthread_creates; -1: no bound
}  // namespace

extern "C" int pthread_create(pthread_t* t, const pthread_attr_t* attr, void* (*fn)(void*),
                              void* arg) {
  using Fn = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
  static Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "pthread_create"));
  if (g_no_threads.load() || t_allowed == 0) return EAGAIN;
  if (t_allowed > 0) --t_allowed;
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

// This thread may make `n` more threads, then none, until destroyed.
class ThreadsLeft {
 public:
  explicit ThreadsLeft(int n) { t_allowed = n; }
  ~ThreadsLeft() { t_allowed = -1; }
};

class ChannelSpawnFailureTest : public ::testing::TestWithParam<std::string> {};

// The channel opens on the thread that makes the first transfer to the peer,
// which starts its lane threads (tcp and shm: a receiver and a sender per
// lane; local: a worker): each of them in turn is the one that cannot start.
TEST_P(ChannelSpawnFailureTest, LaneThreadThatCannotStartFailsTheOpenAndTheNextOneOpens) {
  constexpr int kLanes = 2;
  const int threads = GetParam() == "local" ? kLanes : 2 * kLanes;
  for (int allowed = 0; allowed < threads; ++allowed) {
    Buffers bufs;
    AgentOptions o;
    o.lanes_per_peer = kLanes;
    Pair p = MakePair(GetParam(), o);
    ASSERT_TRUE(p.a && p.b);
    auto& src = bufs.Make(4096);
    auto& dst = bufs.Make(4096);
    Fill(src, 70 + allowed);
    ASSERT_TRUE(p.a->RegisterMemory(src.data(), src.size(), MemoryKind::kHost).ok());
    ASSERT_TRUE(p.b->RegisterMemory(dst.data(), dst.size(), MemoryKind::kHost).ok());
    ASSERT_NO_FATAL_FAILURE(Connect(*p.a, *p.b));
    {
      ThreadsLeft left(allowed);
      auto h = MakeSimple(*p.a, "b", Op::kWrite, src.data(), dst.data(), src.size());
      ASSERT_FALSE(h.ok()) << allowed << " thread(s) allowed";
      EXPECT_NE(h.status().message().find("cannot start the"), std::string::npos)
          << h.status().ToString();
    }
    auto h = MakeSimple(*p.a, "b", Op::kWrite, src.data(), dst.data(), src.size());
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    XferHandle x = h.value();
    ASSERT_TRUE(PostAndWait(*p.a, &x).ok()) << allowed << " thread(s) allowed before";
    EXPECT_EQ(FirstMismatch(dst.data(), dst.size(), 70 + allowed), -1);
    EXPECT_TRUE(p.a->Release(&x).ok());
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, ChannelSpawnFailureTest,
                         ::testing::Values("tcp", "shm", "local"),
                         [](const auto& info) { return info.param; });

INSTANTIATE_TEST_SUITE_P(Stream, SpawnFailureTest, ::testing::Values("tcp", "shm"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace kvlane::test
