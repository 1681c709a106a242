// cuda_transfer_test's mixed stress case: several posting threads, each
// reposting its own prepared transfers of every path the cuda transport has
// (the proxy with one and with several segments, the copy kernel for a
// contiguous range and for a scattered list, the copy engine), READ and WRITE,
// one to three at once, each post with a fresh payload that is checked byte for
// byte after it completes. A record published before its data landed, a lane
// choice that loses a post, or a slot reused while in flight shows up as a
// mismatch, a wrong status or a timeout.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <mutex>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cuda_transfer_fixture.h"
#include "target_proc.h"

namespace kvlane::test {
namespace {

class CudaStressTest : public CudaTransferTest {
 protected:
  // The mixed run on a fresh agent made with `o`; failures as EXPECTs.
  void RunMixed(AgentOptions o);
};

constexpr int kThreads = 3;
constexpr int kRounds = 120;
constexpr uint64_t kPerThread = 8 << 20;  // each thread's part of both buffers

// One kind of transfer inside a thread's part: descriptor i moves local
// offset loc[i] to remote offset rem[i], `len` bytes each.
struct Kind {
  const char* name;
  uint64_t len;
  std::vector<uint64_t> loc, rem;
};

// Offsets inside a thread's part; no two kinds overlap on either side.
std::vector<Kind> Kinds() {
  std::vector<Kind> k;
  k.push_back({"4KiB proxy", 4096, {0}, {0}});
  k.push_back(
      {"3x8KiB proxy list", 8192, {64 << 10, 80 << 10, 96 << 10}, {112 << 10, 64 << 10, 88 << 10}});
  k.push_back({"192KiB copy kernel", 192 << 10, {512 << 10}, {512 << 10}});
  k.push_back({"2MiB copy engine", 2 << 20, {1 << 20}, {1 << 20}});
  Kind list{"40x16KiB list", 16 << 10, {}, {}};
  std::vector<uint64_t> slots(40);
  std::iota(slots.begin(), slots.end(), 0);
  std::mt19937 rng(3);
  std::shuffle(slots.begin(), slots.end(), rng);
  for (uint64_t i = 0; i < 40; ++i) {
    list.loc.push_back((4 << 20) + i * (16 << 10));
    list.rem.push_back((4 << 20) + slots[i] * (16 << 10));
  }
  k.push_back(std::move(list));
  return k;
}

void CudaStressTest::RunMixed(AgentOptions o) {
  MakeAgent(o);
  const uint64_t total = kThreads * kPerThread;
  uint8_t* local = DevAlloc(total);
  ASSERT_TRUE(agent_->RegisterMemory(local, total, MemoryKind::kCuda).ok());
  const Remote remote = Alloc(total);
  Load();
  const std::vector<Kind> kinds = Kinds();
  // handles[t][k][op]: op 0 WRITE, 1 READ.
  std::vector<std::vector<std::array<XferHandle, 2>>> handles(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    for (const Kind& kd : kinds) {
      DescList l{MemoryKind::kCuda, {}}, r{MemoryKind::kCuda, {}};
      for (size_t i = 0; i < kd.loc.size(); ++i) {
        l.Add(local + t * kPerThread + kd.loc[i], kd.len);
        r.Add(remote.addr + t * kPerThread + kd.rem[i], kd.len);
      }
      handles[t].push_back({Make(Op::kWrite, l, r), Make(Op::kRead, l, r)});
    }
  }
  std::mutex target_mu;  // TargetProc::Call is one pipe
  auto remote_fill = [&](uint64_t addr, uint64_t len, uint64_t seed) {
    std::lock_guard lock(target_mu);
    return RemoteFill(addr, len, seed);
  };
  auto remote_check = [&](uint64_t addr, uint64_t len, uint64_t seed) {
    std::lock_guard lock(target_mu);
    return RemoteCheck(addr, len, seed);
  };
  std::vector<std::string> failures(kThreads);
  auto run = [&](int t) {
    std::mt19937 rng(100 + t);
    for (int round = 0; round < kRounds && failures[t].empty(); ++round) {
      // One to three distinct kinds, each READ or WRITE, posted together.
      std::vector<int> pick(kinds.size());
      std::iota(pick.begin(), pick.end(), 0);
      std::shuffle(pick.begin(), pick.end(), rng);
      pick.resize(1 + rng() % 3);
      std::vector<int> ops;
      for (size_t j = 0; j < pick.size(); ++j) ops.push_back(static_cast<int>(rng() % 2));
      auto seed = [&](size_t j, size_t i) {
        return uint64_t(t) << 40 | uint64_t(round) << 20 | j << 10 | i;
      };
      for (size_t j = 0; j < pick.size(); ++j) {
        const Kind& kd = kinds[pick[j]];
        for (size_t i = 0; i < kd.loc.size(); ++i) {
          const uint64_t at = t * kPerThread;
          if (ops[j] == 0) {
            FillDevice(local + at + kd.loc[i], kd.len, seed(j, i));
          } else {
            const std::string filled =
                remote_fill(remote.addr + at + kd.rem[i], kd.len, seed(j, i));
            if (filled != "ok") failures[t] = "target fill: " + filled;
          }
        }
      }
      for (size_t j = 0; j < pick.size(); ++j) {
        Status s = agent_->Post(&handles[t][pick[j]][ops[j]]);
        if (s.is_error())
          failures[t] = std::string("post ") + kinds[pick[j]].name + ": " + s.ToString();
      }
      for (size_t j = 0; j < pick.size() && failures[t].empty(); ++j) {
        Status s = agent_->Wait(handles[t][pick[j]][ops[j]], std::chrono::seconds(20));
        if (!s.ok()) failures[t] = std::string("wait ") + kinds[pick[j]].name + ": " + s.ToString();
      }
      for (size_t j = 0; j < pick.size() && failures[t].empty(); ++j) {
        const Kind& kd = kinds[pick[j]];
        for (size_t i = 0; i < kd.loc.size() && failures[t].empty(); ++i) {
          const uint64_t at = t * kPerThread;
          const int64_t bad = ops[j] == 0
                                  ? remote_check(remote.addr + at + kd.rem[i], kd.len, seed(j, i))
                                  : CheckDevice(local + at + kd.loc[i], kd.len, seed(j, i));
          if (bad != -1)
            failures[t] = std::string(ops[j] == 0 ? "WRITE " : "READ ") + kd.name + " round " +
                          std::to_string(round) + " descriptor " + std::to_string(i) +
                          ": first bad byte " + std::to_string(bad);
        }
      }
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(run, t);
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], "") << "thread " << t;
  agent_.reset();  // before the fixture frees `local`
}

// The lanes the engine picks (several per peer), then every post on one lane
// (small posts queue behind bulk ones; nothing moves without a queue item
// unless the lane is idle).
TEST_P(CudaStressTest, MixedPathsFromSeveralThreadsAreExact) {
  {
    SCOPED_TRACE("default lanes");
    RunMixed({});
  }
  AgentOptions one_lane;
  one_lane.lanes_per_peer = 1;
  SCOPED_TRACE("one lane per peer");
  RunMixed(one_lane);
}

INSTANTIATE_TEST_SUITE_P(Topologies, CudaStressTest, ::testing::Values("two_gpus", "one_gpu"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace kvlane::test
