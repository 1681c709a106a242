// The engine's correctness cases on the cuda transport: this process is the
// initiator (GPU 0), a child process is the target (GPU 1, or GPU 0 too:
// two processes sharing one device).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <sstream>
#include <thread>

#include "core/agent_impl.h"
#include "target_proc.h"
#include "test_util.h"

namespace kvlane::test {
namespace {

using namespace std::chrono_literals;

int DeviceCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
  return n;
}

struct Remote {
  uint64_t addr = 0;
  uint64_t region = 0;
};

class CudaTransferTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    int n = DeviceCount();
    if (n == 0) GTEST_SKIP() << "no CUDA device";
    if (GetParam() == "two_gpus" && n < 2) GTEST_SKIP() << "needs two GPUs";
    cudaSetDevice(0);
    target_ = TargetProc::Spawn(GetParam() == "two_gpus" ? 1 : 0);
    ASSERT_TRUE(target_.alive());
  }
  void MakeAgent(AgentOptions o = {}) {
    o.name = "init";
    o.transports = {"cuda"};
    auto a = Agent::Create(o);
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    agent_ = std::move(a).value();
  }
  Remote Alloc(uint64_t bytes) {
    std::istringstream in(target_.Call("alloc " + std::to_string(bytes)));
    Remote r;
    in >> r.addr >> r.region;
    return r;
  }
  void Load() {
    auto name = agent_->LoadPeer(Unhex(target_.Call("meta")));
    ASSERT_TRUE(name.ok()) << name.status().ToString();
  }
  int64_t RemoteCheck(uint64_t addr, uint64_t len, uint64_t seed) {
    return std::stoll(target_.Call("check " + std::to_string(addr) + " " + std::to_string(len) + " " +
                                   std::to_string(seed)));
  }
  uint8_t* DevAlloc(uint64_t bytes) {
    void* p = nullptr;
    EXPECT_EQ(cudaMalloc(&p, bytes), cudaSuccess);
    bufs_.push_back(p);
    return static_cast<uint8_t*>(p);
  }
  XferHandle Make(Op op, const DescList& l, const DescList& r, std::string_view notif = {}, XferOptions xo = {}) {
    auto pl = agent_->PrepareLocal(l);
    auto pr = agent_->PrepareRemote("target", r);
    EXPECT_TRUE(pl.ok() && pr.ok()) << pl.status().ToString() << pr.status().ToString();
    auto h = agent_->MakeTransfer(op, pl.value(), {}, pr.value(), {}, notif, xo);
    EXPECT_TRUE(h.ok()) << h.status().ToString();
    return h.ok() ? h.value() : XferHandle{};
  }
  Status PostWait(XferHandle* h) {
    Status s = agent_->Post(h);
    if (s.is_error()) return s;
    return agent_->Wait(*h, 20s);
  }
  void TearDown() override {
    agent_.reset();
    for (void* p : bufs_) cudaFree(p);
  }

  TargetProc target_;
  std::unique_ptr<Agent> agent_;
  std::vector<void*> bufs_;
};

TEST_P(CudaTransferTest, Moves513DescriptorsBothWays) {
  MakeAgent();
  constexpr int kDescs = 513;
  std::vector<uint64_t> lens(kDescs);
  for (int i = 0; i < kDescs; ++i) lens[i] = 64 + (i * 37) % 4000;
  uint64_t total = std::accumulate(lens.begin(), lens.end(), uint64_t{0});
  uint8_t* src = DevAlloc(total);
  uint8_t* back = DevAlloc(total);
  FillDevice(src, total, 7);
  cudaMemset(back, 0xCC, total);
  ASSERT_TRUE(agent_->RegisterMemory(src, total, MemoryKind::kCuda).ok());
  ASSERT_TRUE(agent_->RegisterMemory(back, total, MemoryKind::kCuda).ok());
  Remote dst = Alloc(total);
  Load();
  DescList ls{MemoryKind::kCuda, {}}, lb{MemoryKind::kCuda, {}}, rd{MemoryKind::kCuda, {}};
  uint64_t off = 0;
  for (int i = 0; i < kDescs; ++i) {
    ls.Add(src + off, lens[i]);
    lb.Add(back + off, lens[i]);
    rd.Add(dst.addr + off, lens[i]);
    off += lens[i];
  }
  XferHandle w = Make(Op::kWrite, ls, rd);
  ASSERT_TRUE(PostWait(&w).ok());
  EXPECT_EQ(RemoteCheck(dst.addr, total, 7), -1);
  XferHandle r = Make(Op::kRead, lb, rd);
  ASSERT_TRUE(PostWait(&r).ok());
  EXPECT_EQ(CheckDevice(back, total, 7), -1);
  EXPECT_EQ(agent_->PeerTransport("target").value(), "cuda");
  EXPECT_TRUE(agent_->Release(&w).ok());
  EXPECT_TRUE(agent_->Release(&r).ok());
}

// 14 requests of 2 chunks each fill 28 ring slots; 129 more reuse the slots.
TEST_P(CudaTransferTest, FourteenOutstandingThenReuse) {
  AgentOptions o;
  o.lanes_per_peer = 1;
  o.lane_ring_slots = 32;
  o.max_requests = 14;
  o.chunk_bytes = 4096;
  MakeAgent(o);
  constexpr int kSlots = 14;
  constexpr uint64_t kBytes = 8192;
  uint8_t* src = DevAlloc(kSlots * kBytes);
  ASSERT_TRUE(agent_->RegisterMemory(src, kSlots * kBytes, MemoryKind::kCuda).ok());
  Remote dst = Alloc(kSlots * kBytes);
  Load();
  std::vector<XferHandle> h(kSlots);
  auto make = [&](int j) {
    DescList l{MemoryKind::kCuda, {}}, r{MemoryKind::kCuda, {}};
    l.Add(src + j * kBytes, kBytes);
    r.Add(dst.addr + j * kBytes, kBytes);
    return Make(Op::kWrite, l, r);
  };
  for (int j = 0; j < kSlots; ++j) {
    FillDevice(src + j * kBytes, kBytes, 1000 + j);
    h[j] = make(j);
  }
  for (int j = 0; j < kSlots; ++j) ASSERT_FALSE(agent_->Post(&h[j]).is_error());
  for (int j = 0; j < kSlots; ++j) ASSERT_TRUE(agent_->Wait(h[j], 20s).ok());
  for (int j = 0; j < kSlots; ++j) EXPECT_EQ(RemoteCheck(dst.addr + j * kBytes, kBytes, 1000 + j), -1);
  for (int k = 0; k < 129; ++k) {
    int j = k % kSlots;
    XferHandle old = h[j];
    ASSERT_TRUE(agent_->Release(&h[j]).ok());
    EXPECT_EQ(agent_->Check(old).code(), Code::kNotFound);
    FillDevice(src + j * kBytes, kBytes, 5000 + k);
    h[j] = make(j);
    EXPECT_EQ(agent_->Check(old).code(), Code::kNotFound);  // same slot, new generation
    ASSERT_TRUE(PostWait(&h[j]).ok());
    ASSERT_EQ(RemoteCheck(dst.addr + j * kBytes, kBytes, 5000 + k), -1) << "round " << k;
  }
}

TEST_P(CudaTransferTest, RepostsWithNewPayloadAndEpoch) {
  MakeAgent();
  constexpr uint64_t kBytes = 3 << 20;  // several chunks, copy-engine path
  uint8_t* src = DevAlloc(kBytes);
  ASSERT_TRUE(agent_->RegisterMemory(src, kBytes, MemoryKind::kCuda).ok());
  Remote dst = Alloc(kBytes);
  Load();
  DescList l{MemoryKind::kCuda, {}}, r{MemoryKind::kCuda, {}};
  for (uint64_t end = kBytes; end > 0;) {  // uneven descriptors in reverse order: kernel path
    uint64_t len = std::min<uint64_t>(end, (96 << 10) - 16);
    end -= len;
    l.Add(src + end, len);
    r.Add(dst.addr + end, len);
  }
  DescList lc{MemoryKind::kCuda, {}}, rc{MemoryKind::kCuda, {}};
  lc.Add(src, kBytes);
  rc.Add(dst.addr, kBytes);
  XferHandle hs = Make(Op::kWrite, l, r), hc = Make(Op::kWrite, lc, rc);
  for (uint64_t epoch = 1; epoch <= 6; ++epoch) {
    XferHandle& h = epoch % 2 ? hs : hc;
    FillDevice(src, kBytes, epoch * 77);
    target_.Call("memset " + std::to_string(dst.addr) + " " + std::to_string(kBytes) + " 0");
    XferHandle before = h;
    ASSERT_TRUE(PostWait(&h).ok());
    EXPECT_EQ(h.gen, before.gen + 1);
    EXPECT_EQ(agent_->Check(before).code(), Code::kNotFound);
    ASSERT_EQ(RemoteCheck(dst.addr, kBytes, epoch * 77), -1) << "epoch " << epoch;
  }
}

TEST_P(CudaTransferTest, NotificationsFollowTheData) {
  MakeAgent();
  constexpr uint64_t kBytes = 1 << 20;
  uint8_t* src = DevAlloc(kBytes);
  ASSERT_TRUE(agent_->RegisterMemory(src, kBytes, MemoryKind::kCuda).ok());
  Remote dst = Alloc(kBytes);
  Load();
  DescList l{MemoryKind::kCuda, {}}, r{MemoryKind::kCuda, {}};
  l.Add(src, kBytes);
  r.Add(dst.addr, kBytes);
  XferHandle h = Make(Op::kWrite, l, r, "epoch-1");
  for (int e = 1; e <= 3; ++e) {
    FillDevice(src, kBytes, 300 + e);
    ASSERT_FALSE(agent_->Post(&h).is_error());
    std::string got = target_.Call("notifcheck " + std::to_string(dst.addr) + " " + std::to_string(kBytes) +
                                   " " + std::to_string(300 + e));
    EXPECT_EQ(got, "epoch-1 -1");
    ASSERT_TRUE(agent_->Wait(h, 20s).ok());
  }
  ASSERT_TRUE(agent_->SendNotification("target", "standalone").ok());
  EXPECT_EQ(target_.Call("notifcheck 0 0 0"), "standalone -1");
}

TEST_P(CudaTransferTest, DeregisteredRegionIsStale) {
  MakeAgent();
  constexpr uint64_t kBytes = 64 << 10;
  uint8_t* src = DevAlloc(kBytes);
  ASSERT_TRUE(agent_->RegisterMemory(src, kBytes, MemoryKind::kCuda).ok());
  Remote used = Alloc(kBytes), fresh = Alloc(kBytes);
  Load();
  DescList l{MemoryKind::kCuda, {}}, ru{MemoryKind::kCuda, {}}, rf{MemoryKind::kCuda, {}};
  l.Add(src, kBytes);
  ru.Add(used.addr, kBytes);
  rf.Add(fresh.addr, kBytes);
  XferHandle hu = Make(Op::kRead, l, ru), hf = Make(Op::kRead, l, rf);
  ASSERT_TRUE(PostWait(&hu).ok());  // table built and mapped before the deregistration
  EXPECT_EQ(target_.Call("dereg " + std::to_string(used.region)), "0");
  EXPECT_EQ(target_.Call("dereg " + std::to_string(fresh.region)), "0");
  EXPECT_EQ(PostWait(&hu).code(), Code::kRemoteStale);
  EXPECT_EQ(PostWait(&hf).code(), Code::kRemoteStale);  // never mapped
  EXPECT_TRUE(agent_->Release(&hu).ok());
  EXPECT_TRUE(agent_->Release(&hf).ok());
  EXPECT_TRUE(agent_->PeerError("target").ok());  // stale is per request, not fatal
}

TEST_P(CudaTransferTest, LatchedErrorRejectsPostAndNotification) {
  MakeAgent();
  constexpr uint64_t kBytes = 64 << 10;
  uint8_t* src = DevAlloc(kBytes);
  FillDevice(src, kBytes, 9);
  ASSERT_TRUE(agent_->RegisterMemory(src, kBytes, MemoryKind::kCuda).ok());
  Remote dst = Alloc(kBytes);
  target_.Call("memset " + std::to_string(dst.addr) + " " + std::to_string(kBytes) + " 90");
  Load();
  DescList l{MemoryKind::kCuda, {}}, r{MemoryKind::kCuda, {}};
  l.Add(src, kBytes);
  r.Add(dst.addr, kBytes);
  XferHandle h = Make(Op::kWrite, l, r, "late");
  auto ch = agent_->impl()->PeerChannel("target");
  ASSERT_TRUE(ch.ok());
  ch.value()->latch().Latch(Status::Backend("injected lane fault"));
  XferHandle before = h;
  EXPECT_EQ(agent_->Post(&h).code(), Code::kBackend);
  EXPECT_EQ(h.gen, before.gen);  // still the caller's, unchanged
  EXPECT_EQ(agent_->SendNotification("target", "x").code(), Code::kBackend);
  EXPECT_EQ(target_.Call("checkbyte " + std::to_string(dst.addr) + " " + std::to_string(kBytes) + " 90"), "-1");
  EXPECT_TRUE(agent_->Release(&h).ok());
}

TEST_P(CudaTransferTest, DeadPeerEndsWithRemoteDisconnect) {
  MakeAgent();
  constexpr uint64_t kBytes = 64 << 10;
  uint8_t* src = DevAlloc(kBytes);
  ASSERT_TRUE(agent_->RegisterMemory(src, kBytes, MemoryKind::kCuda).ok());
  Remote dst = Alloc(kBytes);
  Load();
  DescList l{MemoryKind::kCuda, {}}, r{MemoryKind::kCuda, {}};
  l.Add(src, kBytes);
  r.Add(dst.addr, kBytes);
  XferHandle h = Make(Op::kWrite, l, r);
  ASSERT_TRUE(PostWait(&h).ok());
  target_.Kill();
  auto until = std::chrono::steady_clock::now() + 5s;
  while (agent_->PeerError("target").ok() && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(1ms);
  EXPECT_EQ(agent_->PeerError("target").code(), Code::kRemoteDisconnect);
  EXPECT_EQ(agent_->Post(&h).code(), Code::kRemoteDisconnect);
  EXPECT_TRUE(agent_->Release(&h).ok());
}

TEST_P(CudaTransferTest, PinnedHostToDeviceBothWays) {
  MakeAgent();
  constexpr uint64_t kBytes = (4 << 20) + 4096;
  void* host = nullptr;
  ASSERT_EQ(cudaMallocHost(&host, kBytes), cudaSuccess);
  auto* h8 = static_cast<uint8_t*>(host);
  std::vector<uint8_t> pattern(kBytes);
  Fill(pattern, 42);
  std::memcpy(h8, pattern.data(), kBytes);
  ASSERT_TRUE(agent_->RegisterMemory(host, kBytes, MemoryKind::kHost).ok());
  Remote dst = Alloc(kBytes);
  Load();
  DescList l{MemoryKind::kHost, {}}, r{MemoryKind::kCuda, {}};
  l.Add(host, kBytes);
  r.Add(dst.addr, kBytes);
  XferHandle w = Make(Op::kWrite, l, r);
  ASSERT_TRUE(PostWait(&w).ok());
  EXPECT_EQ(RemoteCheck(dst.addr, kBytes, 42), -1);
  std::memset(h8, 0, kBytes);
  XferHandle rd = Make(Op::kRead, l, r);
  ASSERT_TRUE(PostWait(&rd).ok());
  EXPECT_EQ(FirstMismatch(h8, kBytes, 42), -1);
  EXPECT_TRUE(agent_->Release(&w).ok());
  EXPECT_TRUE(agent_->Release(&rd).ok());
  agent_.reset();
  cudaFreeHost(host);
}

INSTANTIATE_TEST_SUITE_P(Topologies, CudaTransferTest, ::testing::Values("two_gpus", "one_gpu"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace kvlane::test

int main(int argc, char** argv) {
  int rc = kvlane::test::MaybeRunTarget(argc, argv);
  if (rc >= 0) return rc;
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
