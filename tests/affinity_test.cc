// AgentOptions::worker_cpus: every thread an agent starts (listeners, lanes,
// servers, and the threads those start) runs on the worker CPUs; the thread
// that created the agent and its channels keeps its own mask.
#include "core/affinity.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "test_util.h"

namespace kvlane::test {
namespace {

std::set<int> Tids() {
  std::set<int> out;
  DIR* d = opendir("/proc/self/task");
  if (d == nullptr) return out;
  while (dirent* e = readdir(d))
    if (e->d_name[0] != '.') out.insert(std::stoi(e->d_name));
  closedir(d);
  return out;
}

std::vector<int> CpusOf(int tid) {
  cpu_set_t s;
  CPU_ZERO(&s);
  std::vector<int> out;
  if (sched_getaffinity(tid, sizeof(s), &s) != 0) return out;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &s)) out.push_back(c);
  return out;
}

class AffinityTest : public ::testing::TestWithParam<std::string> {};

// Workers on the last CPU this test may use; the test's thread keeps them all.
TEST_P(AffinityTest, AgentThreadsRunOnWorkerCpusOnly) {
  const std::vector<int> mine = CpusOf(0);
  ASSERT_FALSE(mine.empty());
  const std::vector<int> workers = {mine.back()};
  const std::set<int> before = Tids();
  AgentOptions o;
  o.worker_cpus = workers;
  Buffers bufs;
  Pair pair = MakePair(GetParam(), o);
  ASSERT_TRUE(pair.a && pair.b);
  EXPECT_EQ(CpusOf(0), mine) << "Create left the caller's mask changed";
  auto& src = bufs.Make(1 << 20);
  auto& dst = bufs.Make(1 << 20);
  Fill(src, 3);
  ASSERT_TRUE(pair.a->RegisterMemory(src.data(), src.size()).ok());
  ASSERT_TRUE(pair.b->RegisterMemory(dst.data(), dst.size()).ok());
  Connect(*pair.a, *pair.b);
  auto h = MakeSimple(*pair.a, "b", Op::kWrite, src.data(), dst.data(), src.size());
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  ASSERT_TRUE(PostAndWait(*pair.a, &h.value()).ok());
  EXPECT_EQ(FirstMismatch(dst.data(), dst.size(), 3), -1);
  EXPECT_EQ(CpusOf(0), mine) << "MakeTransfer left the caller's mask changed";
  int started = 0;
  for (int tid : Tids()) {
    if (before.count(tid) != 0) continue;
    ++started;
    EXPECT_EQ(CpusOf(tid), workers) << "thread " << tid;
  }
  EXPECT_GT(started, 0) << "the agents started no thread";
}

TEST(AffinityOptions, CpusTheKernelRefusesOrRepeatedAreRefused) {
  const std::vector<int> mine = CpusOf(0);
  ASSERT_FALSE(mine.empty());
  AgentOptions o;
  o.name = "x";
  o.worker_cpus = {mine[0], mine[0]};
  EXPECT_EQ(Agent::Create(o).status().code(), Code::kInvalidArgument);
  o.worker_cpus = {-1};
  EXPECT_EQ(Agent::Create(o).status().code(), Code::kInvalidArgument);
  o.worker_cpus = {1024};
  EXPECT_EQ(Agent::Create(o).status().code(), Code::kInvalidArgument);
  const int outside = static_cast<int>(sysconf(_SC_NPROCESSORS_CONF));  // no such CPU here
  ASSERT_LT(outside, 1024);
  o.worker_cpus = {outside};
  auto r = Agent::Create(o);
  ASSERT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find("CPU " + std::to_string(outside)), std::string::npos)
      << r.status().ToString();
  o.worker_cpus = {mine[0]};
  EXPECT_TRUE(Agent::Create(o).ok());
}

// The kernel runs a thread on any CPU of a mask it may use and drops the
// others: a list is checked CPU by CPU, and one the process may not run on
// fails Create, named alone, however many usable ones it comes with.
TEST(AffinityOptions, AListWithOneCpuTheKernelRefusesIsRefusedNamingIt) {
  const std::vector<int> mine = CpusOf(0);
  ASSERT_FALSE(mine.empty());
  if (sysconf(_SC_NPROCESSORS_CONF) > 1000) GTEST_SKIP() << "CPU 1000 may exist here";
  AgentOptions o;
  o.name = "x";
  o.worker_cpus = {mine[0], 1000};
  auto r = Agent::Create(o);
  ASSERT_EQ(r.status().code(), Code::kInvalidArgument) << r.status().ToString();
  EXPECT_NE(r.status().message().find("(CPU 1000)"), std::string::npos) << r.status().ToString();
  EXPECT_EQ(CpusOf(0), mine) << "a refused Create left the caller's mask changed";
  o.worker_cpus = {mine[0]};
  EXPECT_TRUE(Agent::Create(o).ok());
  o.worker_cpus = mine;  // every CPU this test may use (0 and 1 on a two-CPU host)
  auto all = Agent::Create(o);
  EXPECT_TRUE(all.ok()) << all.status().ToString();
  // A channel opened after a worker CPU went away (its check is not every_cpu)
  // runs on the rest; none left is still refused.
  {
    core::ScopedAffinity rest({mine[0], 1000}, /*every_cpu=*/false);
    EXPECT_TRUE(rest.status().ok()) << rest.status().ToString();
    EXPECT_EQ(CpusOf(0), std::vector<int>{mine[0]});
  }
  EXPECT_EQ(CpusOf(0), mine);
  core::ScopedAffinity none({1000}, /*every_cpu=*/false);
  EXPECT_EQ(none.status().code(), Code::kInvalidArgument) << none.status().ToString();
}

// The documented use: the application pins its polling thread first, then
// creates the agent with the other CPUs. The calling thread's own mask does not
// limit worker_cpus, and it is left as it was.
TEST(AffinityOptions, WorkerCpusMayLieOutsideTheCallersMask) {
  const std::vector<int> mine = CpusOf(0);
  if (mine.size() < 2) GTEST_SKIP() << "needs two CPUs";
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(mine[0], &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
  AgentOptions o;
  o.name = "x";
  o.worker_cpus = {mine[1]};
  auto a = Agent::Create(o);
  EXPECT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(CpusOf(0), std::vector<int>{mine[0]});
  o.worker_cpus = mine;  // a list beyond the caller's mask, checked CPU by CPU
  auto wide = Agent::Create(o);
  EXPECT_TRUE(wide.ok()) << wide.status().ToString();
  EXPECT_EQ(CpusOf(0), std::vector<int>{mine[0]});
  cpu_set_t all;
  CPU_ZERO(&all);
  for (int c : mine) CPU_SET(c, &all);
  ASSERT_EQ(sched_setaffinity(0, sizeof(all), &all), 0);
}

INSTANTIATE_TEST_SUITE_P(Transports, AffinityTest, ::testing::Values("local", "shm", "tcp"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace kvlane::test
