// The mixed-call run (tests/mixed_calls.h) on the cuda transport: both agents
// in this process (the peer's memory through peer access), device memory on
// both sides. "one_gpu": both on GPU 0; "two_gpus": the initiator's pages on
// GPU 0, the peer's on GPU 1.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "mixed_calls.h"
#include "test_util.h"

namespace kvlane::test {
namespace {

// A worker's pages in device memory. Put and Get copy through the legacy
// stream of the page's device and wait for it (kvlane's streams do not wait
// for other streams: the bytes must have landed before a post).
class DevicePages final : public PageStore {
 public:
  explicit DevicePages(int device) : device_(device) {
    Expect(cudaSetDevice(device_), "cudaSetDevice");
    Expect(cudaMalloc(&base_, kMixPages * kMixPage), "cudaMalloc");
  }
  ~DevicePages() override {
    if (base_ != nullptr) (void)cudaFree(base_);
  }
  uint8_t* base() override { return static_cast<uint8_t*>(base_); }
  MemoryKind kind() const override { return MemoryKind::kCuda; }
  int32_t device() const override { return device_; }
  void Put(uint32_t page, const uint8_t* bytes) override {
    Expect(cudaSetDevice(device_), "cudaSetDevice");
    Expect(cudaMemcpy(base() + page * kMixPage, bytes, kMixPage, cudaMemcpyDefault),
           "cudaMemcpy in");
    Expect(cudaStreamSynchronize(cudaStreamLegacy), "cudaStreamSynchronize");
  }
  void Get(uint32_t page, uint8_t* out) override {
    Expect(cudaSetDevice(device_), "cudaSetDevice");
    Expect(cudaMemcpy(out, base() + page * kMixPage, kMixPage, cudaMemcpyDefault),
           "cudaMemcpy out");
  }

 private:
  static void Expect(cudaError_t e, const char* what) {
    if (e != cudaSuccess) ADD_FAILURE() << what << ": " << cudaGetErrorString(e);
  }
  int device_;
  void* base_ = nullptr;
};

class CudaMixedCallsTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) GTEST_SKIP() << "no CUDA device";
    const bool two = GetParam() == "two_gpus";
    if (two && n < 2) GTEST_SKIP() << "needs two GPUs";
    peer_device_ = two ? 1 : 0;
  }
  int peer_device_ = 0;
};

// The plain case first: one WRITE and one READ of every page between the two
// agents, default options.
TEST_P(CudaMixedCallsTest, OneWriteAndOneReadBetweenAgentsOfThisProcess) {
  DevicePages mine(0), theirs(peer_device_);
  std::vector<uint8_t> page(kMixPage), got(kMixPage);
  for (uint32_t p = 0; p < kMixPages; ++p) {
    Fill(page.data(), kMixPage, 5, p * kMixPage);
    mine.Put(p, page.data());
  }
  Pair pair = MakePair("cuda");
  ASSERT_TRUE(pair.a && pair.b);
  ASSERT_TRUE(pair.a->RegisterMemory(mine.base(), kMixPages * kMixPage, MemoryKind::kCuda, 0).ok());
  ASSERT_TRUE(
      pair.b->RegisterMemory(theirs.base(), kMixPages * kMixPage, MemoryKind::kCuda, peer_device_)
          .ok());
  Connect(*pair.a, *pair.b);
  DescList l{MemoryKind::kCuda, {}}, r{MemoryKind::kCuda, {}};
  l.Add(mine.base(), kMixPages * kMixPage, 0);
  r.Add(theirs.base(), kMixPages * kMixPage, peer_device_);
  auto lp = pair.a->PrepareLocal(l);
  auto rp = pair.a->PrepareRemote("b", r);
  ASSERT_TRUE(lp.ok() && rp.ok()) << lp.status().ToString() << " " << rp.status().ToString();
  auto w = pair.a->MakeTransfer(Op::kWrite, lp.value(), {}, rp.value(), {});
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  const Status sw = PostAndWait(*pair.a, &w.value());
  ASSERT_TRUE(sw.ok()) << sw.ToString();
  for (uint32_t p = 0; p < kMixPages; ++p) {
    theirs.Get(p, got.data());
    ASSERT_EQ(FirstMismatch(got.data(), kMixPage, 5, p * kMixPage), -1) << "page " << p;
  }
  for (uint32_t p = 0; p < kMixPages; ++p) {
    Fill(page.data(), kMixPage, 6, p * kMixPage);
    theirs.Put(p, page.data());
  }
  auto rd = pair.a->MakeTransfer(Op::kRead, lp.value(), {}, rp.value(), {});
  ASSERT_TRUE(rd.ok()) << rd.status().ToString();
  const Status sr = PostAndWait(*pair.a, &rd.value());
  ASSERT_TRUE(sr.ok()) << sr.ToString();
  for (uint32_t p = 0; p < kMixPages; ++p) {
    mine.Get(p, got.data());
    ASSERT_EQ(FirstMismatch(got.data(), kMixPage, 6, p * kMixPage), -1) << "page " << p;
  }
}

TEST_P(CudaMixedCallsTest, RandomCallsFromSeveralThreadsKeepEveryByteRight) {
  const int peer_device = peer_device_;
  MixTally t;
  {
    Pair p = MakePair("cuda", MixedCallsOptions());
    ASSERT_TRUE(p.a && p.b);
    Connect(*p.a, *p.b);
    auto via = p.a->PeerTransport("b", MemoryKind::kCuda);
    ASSERT_TRUE(via.ok()) << via.status().ToString();
    ASSERT_EQ(via.value(), "cuda");
    RunMixedCalls(
        *p.a, *p.b,
        [&](uint32_t, bool remote) {
          return std::make_unique<DevicePages>(remote ? peer_device : 0);
        },
        t);
  }
  if (t.failed) return;  // the failure said what went wrong
  EXPECT_GT(t.ok, 0u);
  EXPECT_GT(t.remade, 0u);
  EXPECT_GT(t.deregistered_in_flight, 0u);
  EXPECT_GT(t.remote_churn, 0u);
  EXPECT_GT(t.notifications, 0u);
}

INSTANTIATE_TEST_SUITE_P(Topologies, CudaMixedCallsTest, ::testing::Values("two_gpus", "one_gpu"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace kvlane::test
