// cuda_transfer_test's cases of the resident proxy lane (requests up to
// cuda_proxy_max_bytes).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/agent_impl.h"
#include "cuda_transfer_fixture.h"
#include "target_proc.h"
#include "transport/cuda/cuda_channel.h"

namespace kvlane::test {
namespace {

using namespace std::chrono_literals;

class CudaProxyTest : public CudaTransferTest {
 protected:
  core::CudaChannel* Channel() {
    auto ch = agent_->impl()->PeerChannel("target");
    EXPECT_TRUE(ch.ok());
    return ch.ok() ? dynamic_cast<core::CudaChannel*>(ch.value()) : nullptr;
  }
  AgentOptions OneLane() {
    AgentOptions o;
    o.lanes_per_peer = 1;
    return o;
  }
  // A registered device source of `bytes` filled from `seed`, a target buffer,
  // the peer loaded, and the WRITE between them.
  struct OneWrite {
    uint8_t* src = nullptr;
    Remote dst;
    XferHandle h;
  };
  void ExactSmallTransfers(AgentOptions o, uint64_t min_launches);
  // 400 ms of small WRITEs posted back to back from another thread (the idle
  // exit out of reach); 50 ms in, `call` (a device-wide sync or a free, named
  // `what`) returns within 100 ms, the traffic goes on after it, and every byte
  // lands.
  void ReturnsUnderSteadySmallTraffic(const std::function<cudaError_t()>& call, const char* what,
                                      uint64_t seed) {
    AgentOptions o = OneLane();
    o.cuda_proxy_idle_exit = std::chrono::seconds(1);
    MakeAgent(o);
    constexpr uint64_t kBytes = 4096;
    OneWrite w;
    ASSERT_NO_FATAL_FAILURE(SmallWrite(kBytes, seed, &w));
    auto& [src, dst, h] = w;
    std::atomic<int> posted{0}, failed{0};
    std::thread poster([&, h = h]() mutable {
      auto until = std::chrono::steady_clock::now() + 400ms;
      while (std::chrono::steady_clock::now() < until) {
        if (!PostWait(&h).ok()) ++failed;
        ++posted;
      }
    });
    std::this_thread::sleep_for(50ms);
    auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(call(), cudaSuccess);
    auto waited = std::chrono::steady_clock::now() - t0;
    const int during = posted.load();
    poster.join();
    EXPECT_LT(waited, 100ms) << what << " waited for the proxy under steady traffic";
    EXPECT_GT(posted.load(), during) << "traffic went on after the " << what;
    EXPECT_EQ(failed.load(), 0);
    EXPECT_EQ(RemoteCheck(dst.addr, kBytes, seed), -1);
  }
  // *w: `bytes` of device memory filled from `seed` and registered, as many at the
  // peer, and a WRITE of the one into the other; call under ASSERT_NO_FATAL_FAILURE.
  void SmallWrite(uint64_t bytes, uint64_t seed, OneWrite* w) {
    ASSERT_NO_FATAL_FAILURE(DevAllocRegistered(&w->src, bytes, seed));
    w->dst = Alloc(bytes);
    Load();
    w->h = MakeOne(Op::kWrite, w->src, w->dst.addr, bytes);
  }
};

// Sizes 1 B..64 KiB at odd offsets, single and multi-descriptor, both ways.
TEST_P(CudaProxyTest, SmallTransfersAreExact) { ExactSmallTransfers({}, 1); }

// The same with two proxy blocks (they agree on every entry) renewed every
// 100 us (the ring changes hands between launches hundreds of times).
TEST_P(CudaProxyTest, SmallTransfersAreExactWithTwoBlocksAndFastRenewal) {
  AgentOptions o;
  o.cuda_proxy_blocks = 2;
  o.cuda_proxy_renew_every = std::chrono::microseconds(100);
  ExactSmallTransfers(o, 20);
}

// One block renewed every 100 us: the serving launch hands over right after an
// entry, or, when none comes within 20 us of seeing its successor (the test's
// checks between posts), at a poll that found none. Which one each renewal
// took is not observed here; cuda_renewal_probe times them.
TEST_P(CudaProxyTest, SmallTransfersAreExactWithOneBlockAndFastRenewal) {
  AgentOptions o;
  o.cuda_proxy_renew_every = std::chrono::microseconds(100);
  ExactSmallTransfers(o, 20);
}

// `min_launches`: proxy launches the run must have made over the peer's lanes
// (with fast renewal, many: else the chain was never renewed and the test
// would not cover a hand-over).
void CudaProxyTest::ExactSmallTransfers(AgentOptions o, uint64_t min_launches) {
  MakeAgent(o);
  constexpr uint64_t kBytes = 1 << 20;
  uint8_t *src = nullptr, *back = nullptr;
  ASSERT_NO_FATAL_FAILURE(DevAllocRegistered(&src, kBytes, 21));
  ASSERT_NO_FATAL_FAILURE(DevAllocRegistered(&back, kBytes));
  Remote dst = Alloc(kBytes);
  Load();
  const uint64_t sizes[] = {1, 15, 16, 17, 4096, 4099, 12345, 65536};
  uint64_t off = 0;
  for (int k = 0; k < 64; ++k) {
    uint64_t len = sizes[k % 8], delta = (k * 7) % 13;
    int parts = k % 3 == 0 && len >= 64 ? 4 : 1;
    DescList l{MemoryKind::kCuda, {}}, b{MemoryKind::kCuda, {}}, r{MemoryKind::kCuda, {}};
    for (int p = 0; p < parts; ++p) {
      uint64_t lo = len * p / parts, hi = len * (p + 1) / parts;
      l.Add(src + off + lo, hi - lo);
      b.Add(back + off + delta + lo, hi - lo);  // misaligned against the remote side
      r.Add(dst.addr + off + lo, hi - lo);
    }
    XferHandle w = Make(Op::kWrite, l, r), rd = Make(Op::kRead, b, r);
    for (int rep = 0; rep < 3; ++rep) {
      ASSERT_TRUE(PostWait(&w).ok()) << "size " << len;
      ASSERT_TRUE(PostWait(&rd).ok()) << "size " << len;
    }
    std::vector<uint8_t> want(len), got(len);
    cudaMemcpy(want.data(), src + off, len, cudaMemcpyDefault);
    cudaMemcpy(got.data(), back + off + delta, len, cudaMemcpyDefault);
    ASSERT_EQ(want, got) << "size " << len << " round " << k;
    EXPECT_TRUE(agent_->Release(&w).ok());
    EXPECT_TRUE(agent_->Release(&rd).ok());
    off += (len + 64 + 15) / 16 * 16 + 32;
  }
  core::CudaChannel* ch = Channel();
  ASSERT_NE(ch, nullptr);
  uint64_t launches = 0;
  for (int i = 0; i < ch->lane_count(); ++i) launches += ch->ProxyLaunches(i);
  EXPECT_GE(launches, min_launches) << "proxy launches over the peer's lanes";
}

// On one lane a small request posted after a bulk one retires after it
// (FIFO), though the proxy copied it first; both land intact.
TEST_P(CudaProxyTest, SmallBehindBulkOnOneLaneRetiresInOrder) {
  MakeAgent(OneLane());
  constexpr uint64_t kBulk = 256 << 20, kSmall = 4096;
  uint8_t* src = nullptr;
  ASSERT_NO_FATAL_FAILURE(DevAllocRegistered(&src, kBulk + kSmall, 33));
  Remote dst = Alloc(kBulk + kSmall);
  Load();
  XferHandle hb = MakeOne(Op::kWrite, src, dst.addr, kBulk);
  XferHandle hs = MakeOne(Op::kWrite, src + kBulk, dst.addr + kBulk, kSmall);
  for (int round = 0; round < 5; ++round) {
    ASSERT_FALSE(agent_->Post(&hb).is_error());
    ASSERT_FALSE(agent_->Post(&hs).is_error());
    Status small;
    while ((small = agent_->Check(hs)).in_progress()) {
    }
    ASSERT_TRUE(small.ok()) << small.ToString();
    EXPECT_TRUE(agent_->Check(hb).ok()) << "round " << round << ": small retired before bulk";
    ASSERT_TRUE(agent_->Wait(hb, 20s).ok());
  }
  EXPECT_EQ(RemoteCheck(dst.addr, kBulk + kSmall, 33), -1);
}

// A bulk post the posting thread hands to an idle lane itself (PostWhole)
// counts as that lane's queued bytes: small posts that follow, with the
// engine picking the lane, take the other lane and finish while the bulk
// copy still runs (the lane rotation alone would put every other one behind it).
// 3 GiB: on one GPU a 1 GiB device-to-device copy ends in about 0.8 ms (H100),
// too close to four small round trips plus the small handle's first post
// (table build); it failed once so (session 31). A small post that waits for
// the bulk copy still ends after it, whatever its size.
TEST_P(CudaProxyTest, SmallPostsAvoidTheLaneMovingABulkPost) {
  AgentOptions o;
  o.lanes_per_peer = 2;
  o.cuda_proxy_idle_exit = std::chrono::seconds(1);
  MakeAgent(o);
  constexpr uint64_t kBulk = 3ull << 30, kSmall = 4096;  // one piece (piece_bytes 4 GiB)
  uint8_t* src = nullptr;
  ASSERT_NO_FATAL_FAILURE(DevAllocRegistered(&src, kBulk + kSmall, 44));
  Remote dst = Alloc(kBulk + kSmall);
  Load();
  const uint8_t* small_src = src + kBulk;
  const uint64_t small_dst = dst.addr + kBulk;
  // Both lanes' proxies running first (a proxy's first launch may queue
  // behind copy-engine work).
  for (int lane = 0; lane < 2; ++lane) {
    XferHandle warm =
        MakeOne(Op::kWrite, small_src, small_dst, kSmall, {}, XferOptions{lane, false});
    ASSERT_TRUE(PostWait(&warm).ok());
    EXPECT_TRUE(agent_->Release(&warm).ok());
  }
  XferHandle hb = MakeOne(Op::kWrite, src, dst.addr, kBulk, {}, XferOptions{-1, false});
  XferHandle hs = MakeOne(Op::kWrite, small_src, small_dst, kSmall);
  for (int round = 0; round < 3; ++round) {
    ASSERT_FALSE(agent_->Post(&hb).is_error());
    for (int k = 0; k < 4; ++k)
      ASSERT_TRUE(PostWait(&hs).ok()) << "round " << round << " small " << k;
    EXPECT_TRUE(agent_->Check(hb).in_progress())
        << "round " << round << ": a small post waited for the bulk one";
    ASSERT_TRUE(agent_->Wait(hb, 20s).ok());
  }
  EXPECT_EQ(RemoteCheck(dst.addr, kBulk + kSmall, 44), -1);
}

// A latch on the host reaches the proxy (it copies nothing more), and a small
// post after it is rejected without touching the target.
TEST_P(CudaProxyTest, HostLatchIsMirroredToTheProxy) {
  MakeAgent(OneLane());
  constexpr uint64_t kBytes = 4096;
  OneWrite w;
  ASSERT_NO_FATAL_FAILURE(SmallWrite(kBytes, 8, &w));
  auto& [src, dst, h] = w;
  ASSERT_TRUE(
      PostWait(&h).ok());  // the proxy is running now (it idles out after cuda_proxy_idle_exit)
  core::CudaChannel* ch = Channel();
  ASSERT_NE(ch, nullptr);
  ch->latch().Latch(Status::Backend("injected host fault"));
  auto until = std::chrono::steady_clock::now() + 2s;
  while (!ch->ProxySawLatch(0) && std::chrono::steady_clock::now() < until)
    std::this_thread::yield();
  EXPECT_TRUE(ch->ProxySawLatch(0));
  RemoteMemset(dst.addr, kBytes, 90);
  EXPECT_EQ(agent_->Post(&h).code(), Code::kBackend);
  EXPECT_EQ(RemoteCheckByte(dst.addr, kBytes, 90), -1);
}

// An error raised on the GPU by the proxy latches the channel on the host; the
// request it skipped ends with it and the target keeps its bytes.
TEST_P(CudaProxyTest, GpuErrorLatchesTheChannel) {
  MakeAgent(OneLane());
  constexpr uint64_t kBytes = 4096;
  OneWrite w;
  ASSERT_NO_FATAL_FAILURE(SmallWrite(kBytes, 8, &w));
  auto& [src, dst, h] = w;
  RemoteMemset(dst.addr, kBytes, 90);
  core::CudaChannel* ch = Channel();
  ASSERT_NE(ch, nullptr);
  ch->InjectProxyFault(0);  // seen by the proxy's first poll, before the entry
  Status s = PostWait(&h);
  EXPECT_EQ(s.code(), Code::kBackend) << s.ToString();
  EXPECT_EQ(agent_->PeerError("target").code(), Code::kBackend);
  EXPECT_EQ(agent_->Post(&h).code(), Code::kBackend);
  EXPECT_EQ(RemoteCheckByte(dst.addr, kBytes, 90), -1);
}

// Destroying the agent while the proxy runs (small requests in flight) stops
// the kernel and returns promptly; the cycle repeats.
TEST_P(CudaProxyTest, ShutdownStopsTheProxy) {
  constexpr uint64_t kBytes = 64 << 10;
  uint8_t* src = DevAlloc(kBytes);
  Remote dst = Alloc(kBytes);
  for (int cycle = 0; cycle < 3; ++cycle) {
    MakeAgent();
    ASSERT_NO_FATAL_FAILURE(Register(src, kBytes));
    Load();
    std::vector<XferHandle> hs;
    for (int k = 0; k < 16; ++k) {
      hs.push_back(MakeOne(Op::kWrite, src + k * 4096, dst.addr + k * 4096, 4096));
      ASSERT_FALSE(agent_->Post(&hs.back()).is_error());
    }
    auto t0 = std::chrono::steady_clock::now();
    agent_.reset();
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);
    void* probe = nullptr;  // a device-wide synchronizing call returns: no kernel left behind
    ASSERT_EQ(cudaMalloc(&probe, 1), cudaSuccess);
    EXPECT_EQ(cudaFree(probe), cudaSuccess);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
}

// Under steady small traffic a successor takes the ring over every
// cuda_proxy_renew_every, so that a caller's device-wide sync (which waits for
// the kernels launched before it) returns while the traffic goes on. Without
// renewal it would wait until the traffic stopped (here 400 ms).
TEST_P(CudaProxyTest, DeviceSyncReturnsUnderSteadySmallTraffic) {
  ReturnsUnderSteadySmallTraffic([] { return cudaDeviceSynchronize(); }, "device sync", 12);
}

// A post that finds the proxy stopped starts it itself, possibly while the
// lane's issue thread is falling asleep; that thread must still stop the proxy
// after the idle exit, or a device-wide sync would wait forever. Cycles of
// idle, one small post, idle, then a device sync bounded from another thread
// (found once in lanebench: a sync that never returned).
TEST_P(CudaProxyTest, ProxyStartedByAPostStillExitsWhenIdle) {
  AgentOptions o = OneLane();
  o.spin = 0us;  // the issue thread goes to sleep as soon as it can
  o.cuda_proxy_idle_exit = 100us;
  MakeAgent(o);
  constexpr uint64_t kBytes = 4096;
  OneWrite w;
  ASSERT_NO_FATAL_FAILURE(SmallWrite(kBytes, 14, &w));
  auto& [src, dst, h] = w;
  int stuck = 0;
  for (int cycle = 0; cycle < 300 && stuck == 0; ++cycle) {
    std::this_thread::sleep_for(std::chrono::microseconds(100 + (cycle * 37) % 400));
    ASSERT_TRUE(PostWait(&h).ok()) << "cycle " << cycle;
    std::this_thread::sleep_for(1ms);  // past the idle exit
    auto sync = std::async(std::launch::async, [] { return cudaDeviceSynchronize(); });
    if (sync.wait_for(500ms) != std::future_status::ready) {
      stuck = cycle + 1;
      agent_.reset();  // stops the proxy: the sync returns, the thread joins
    }
    EXPECT_EQ(sync.get(), cudaSuccess);
  }
  EXPECT_EQ(stuck, 0) << "a device sync waited for an orphaned proxy after cycle " << stuck - 1;
  if (agent_) {
    EXPECT_EQ(RemoteCheck(dst.addr, kBytes, 14), -1);
  }
}

// A caller's cudaFree holds back every launch, the successor's too, until the
// running kernels return (cuda_sync_probe): the running proxy leaves on its own
// after its life, the free returns, the successor then takes over. With a
// hand-over that needed a launch first, this deadlocked.
TEST_P(CudaProxyTest, CudaFreeReturnsUnderSteadySmallTraffic) {
  void* p = nullptr;
  ASSERT_EQ(cudaMalloc(&p, 1 << 20), cudaSuccess);
  ReturnsUnderSteadySmallTraffic([p] { return cudaFree(p); }, "cudaFree", 16);
}

// An agent with two peers, small transfers to one (its proxy runs) and bulk to
// the other, is destroyed promptly: every channel stops its proxy before any
// channel frees, because a free waits for every kernel on the device (found in
// lanebench's mixed shape, whose source had to be killed after every run).
// Each peer in turn carries the small traffic, so that either closes first.
TEST_P(CudaProxyTest, TwoPeersShutDownPromptly) {
  TargetProc second = TargetProc::Spawn(GetParam() == "two_gpus" ? 1 : 0, "second");
  ASSERT_TRUE(second.alive());
  constexpr uint64_t kBulk = 2 << 20, kSmall = 4096;
  uint8_t* src = DevAlloc(kBulk);
  FillDevice(src, kBulk, 18);
  Remote at_target = Alloc(kBulk);
  Remote at_second;
  std::istringstream in(second.Call("alloc " + std::to_string(kBulk)));
  in >> at_second.addr >> at_second.region;
  for (int cycle = 0; cycle < 4; ++cycle) {
    MakeAgent(OneLane());
    ASSERT_NO_FATAL_FAILURE(Register(src, kBulk));
    Load();
    ASSERT_TRUE(agent_->LoadPeer(Unhex(second.Call("meta"))).ok());
    const bool small_to_target = cycle % 2 == 0;
    const uint64_t bulk_dst = small_to_target ? at_second.addr : at_target.addr;
    const uint64_t small_dst = small_to_target ? at_target.addr : at_second.addr;
    XferHandle hb =
        MakeOne(Op::kWrite, src, bulk_dst, kBulk, {}, {}, small_to_target ? "second" : "target");
    XferHandle hs =
        MakeOne(Op::kWrite, src, small_dst, kSmall, {}, {}, small_to_target ? "target" : "second");
    for (int k = 0; k < 50; ++k) {
      ASSERT_FALSE(agent_->Post(&hb).is_error());
      ASSERT_FALSE(agent_->Post(&hs).is_error());
      ASSERT_TRUE(agent_->Wait(hs, 20s).ok());
      ASSERT_TRUE(agent_->Wait(hb, 20s).ok());
    }
    auto t0 = std::chrono::steady_clock::now();
    agent_.reset();
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s) << "cycle " << cycle;
  }
  EXPECT_EQ(RemoteCheck(at_target.addr, kBulk, 18), -1);
  std::istringstream chk(
      second.Call("check " + std::to_string(at_second.addr) + " " + std::to_string(kBulk) + " 18"));
  int64_t bad = 0;
  chk >> bad;
  EXPECT_EQ(bad, -1);
}

INSTANTIATE_TEST_SUITE_P(Topologies, CudaProxyTest, ::testing::Values("two_gpus", "one_gpu"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace kvlane::test
