// cuda_transfer_test's cases on VMM memory (cuMemCreate + cuMemMap): legacy
// IPC cannot export it; the target hands each allocation over as a POSIX fd on
// its control socket.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "core/metadata.h"
#include "cuda_transfer_fixture.h"
#include "target_proc.h"
#include "transport/cuda/cuda_blob.h"
#include "vmm_alloc.h"

namespace kvlane::test {
namespace {

constexpr unsigned kNoHandle = 0;  // CU_MEM_HANDLE_TYPE_NONE: not exportable
constexpr unsigned kPosixFd = 1;   // CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR

class CudaVmmTest : public CudaTransferTest {
 protected:
  void SetUp() override {
    CudaTransferTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    for (int dev : {0, TargetDevice()}) {
      std::string why = VmmUnsupported(dev);
      if (!why.empty()) GTEST_SKIP() << why;
    }
    part_ = VmmPartBytes(TargetDevice(), 1, 1);  // one allocation granule (2 MiB on H100/H200)
    ASSERT_GT(part_, 0u);
  }
  void TearDown() override {
    CudaTransferTest::TearDown();  // the agent goes first
    for (void* p : vmm_) VmmFree(p);
  }
  int TargetDevice() const { return GetParam() == "two_gpus" ? 1 : 0; }
  Remote VmmRemote(uint64_t bytes, int parts, unsigned handle_types) {
    std::string line = target_.Call("vmmalloc " + std::to_string(bytes) + " " +
                                    std::to_string(parts) + " " + std::to_string(handle_types));
    std::istringstream in(line);
    Remote r;
    in >> r.addr >> r.region;
    EXPECT_NE(r.region, 0u) << "target could not allocate and register VMM memory: " << line;
    return r;
  }
  uint8_t* LocalVmm(uint64_t bytes, int parts, unsigned handle_types) {
    std::string error;
    void* p = VmmAlloc(0, bytes, parts, handle_types, &error);
    EXPECT_NE(p, nullptr) << error;
    if (p != nullptr) vmm_.push_back(p);
    return static_cast<uint8_t*>(p);
  }
  // The target's export entry for the piece at `addr`, from its metadata.
  core::CudaExport ExportOf(uint64_t addr) {
    auto meta = core::DecodeMeta(Unhex(target_.Call("meta")));
    EXPECT_TRUE(meta.ok());
    auto blob =
        meta.ok() ? core::DecodeCudaBlob(meta->cuda_blob) : Result<core::CudaBlob>(meta.status());
    EXPECT_TRUE(blob.ok()) << blob.status().ToString();
    if (blob.ok())
      for (const core::CudaExport& e : blob->exports)
        if (e.piece_base == addr) return e;
    ADD_FAILURE() << "no export entry for the piece at " << addr;
    return {};
  }
  // WRITE src -> remote, then READ remote -> back, as three descriptors of
  // which the middle one crosses the boundary between the first two allocations.
  void WriteReadExact(uint8_t* src, uint8_t* back, uint64_t remote, uint64_t bytes, uint64_t seed) {
    FillDevice(src, bytes, seed);
    cudaMemset(back, 0xCC, bytes);
    cudaStreamSynchronize(cudaStreamLegacy);
    const uint64_t cut1 = part_ - 4096 - 3, cut2 = std::min(bytes, part_ + 5000);
    DescList ls{MemoryKind::kCuda, {}}, lb{MemoryKind::kCuda, {}}, rd{MemoryKind::kCuda, {}};
    for (auto [lo, hi] : {std::pair{uint64_t{0}, cut1}, {cut1, cut2}, {cut2, bytes}}) {
      if (hi <= lo) continue;
      ls.Add(src + lo, hi - lo);
      lb.Add(back + lo, hi - lo);
      rd.Add(remote + lo, hi - lo);
    }
    XferHandle w = Make(Op::kWrite, ls, rd);
    ASSERT_TRUE(PostWait(&w).ok());
    EXPECT_EQ(RemoteCheck(remote, bytes, seed), -1);
    XferHandle r = Make(Op::kRead, lb, rd);
    ASSERT_TRUE(PostWait(&r).ok());
    EXPECT_EQ(CheckDevice(back, bytes, seed), -1);
    // A small request across the boundary (the proxy path).
    FillDevice(src + part_ - 2048, 4096, seed + 1);
    XferHandle small = MakeOne(Op::kWrite, src + part_ - 2048, remote + part_ - 2048, 4096);
    ASSERT_TRUE(PostWait(&small).ok());
    EXPECT_EQ(RemoteCheck(remote + part_ - 2048, 4096, seed + 1), -1);
    EXPECT_TRUE(agent_->Release(&w).ok());
    EXPECT_TRUE(agent_->Release(&r).ok());
    EXPECT_TRUE(agent_->Release(&small).ok());
  }

  uint64_t part_ = 0;
  std::vector<void*> vmm_;
};

// The target's memory: two VMM allocations mapped back to back, one piece.
TEST_P(CudaVmmTest, TargetVmmWriteReadExact) {
  MakeAgent();
  const uint64_t bytes = 2 * part_;
  Remote dst = VmmRemote(bytes, 2, kPosixFd);
  ASSERT_NE(dst.region, 0u);
  core::CudaExport e = ExportOf(dst.addr);
  EXPECT_EQ(e.kind, core::ExportKind::kVmm) << e.reason;
  ASSERT_EQ(e.allocs.size(), 2u) << "cuMemGetAddressRange should stop at each cuMemMap mapping";
  EXPECT_TRUE(e.allocs[0].handles & core::kVmmPosixFd);
  uint8_t *src = nullptr, *back = nullptr;
  ASSERT_NO_FATAL_FAILURE(DevAllocRegistered(&src, bytes));
  ASSERT_NO_FATAL_FAILURE(DevAllocRegistered(&back, bytes));
  Load();
  WriteReadExact(src, back, dst.addr, bytes, 51);
  EXPECT_EQ(agent_->PeerTransport("target").value(), "cuda");
}

// The initiator's memory is VMM (created without any export handle type: it
// never leaves this process); the target's is cudaMalloc memory.
TEST_P(CudaVmmTest, LocalVmmWriteReadExact) {
  MakeAgent();
  const uint64_t bytes = 2 * part_;
  uint8_t* src = LocalVmm(bytes, 2, kNoHandle);
  uint8_t* back = LocalVmm(bytes, 1, kNoHandle);
  ASSERT_TRUE(src != nullptr && back != nullptr);
  ASSERT_NO_FATAL_FAILURE(Register(src, bytes));
  ASSERT_NO_FATAL_FAILURE(Register(back, bytes));
  Remote dst = Alloc(bytes);
  Load();
  WriteReadExact(src, back, dst.addr, bytes, 61);
}

// VMM on both sides.
TEST_P(CudaVmmTest, VmmToVmmWriteReadExact) {
  MakeAgent();
  const uint64_t bytes = 2 * part_;
  uint8_t* src = LocalVmm(bytes, 1, kPosixFd);
  uint8_t* back = LocalVmm(bytes, 2, kPosixFd);
  ASSERT_TRUE(src != nullptr && back != nullptr);
  ASSERT_NO_FATAL_FAILURE(Register(src, bytes));
  ASSERT_NO_FATAL_FAILURE(Register(back, bytes));
  Remote dst = VmmRemote(bytes, 2, kPosixFd);
  ASSERT_NE(dst.region, 0u);
  Load();
  WriteReadExact(src, back, dst.addr, bytes, 71);
}

// Deregistered VMM pieces read as stale (mapped before or never); the same
// memory registered again is a new piece, imported afresh.
TEST_P(CudaVmmTest, DeregisteredVmmRegionIsStaleThenReregistered) {
  MakeAgent();
  const uint64_t bytes = part_;
  uint8_t* src = nullptr;
  ASSERT_NO_FATAL_FAILURE(DevAllocRegistered(&src, bytes));
  Remote used = VmmRemote(bytes, 1, kPosixFd), fresh = VmmRemote(bytes, 1, kPosixFd);
  Load();
  XferHandle hu = MakeOne(Op::kWrite, src, used.addr, bytes);
  XferHandle hf = MakeOne(Op::kRead, src, fresh.addr, bytes);
  FillDevice(src, bytes, 81);
  ASSERT_TRUE(PostWait(&hu).ok());  // imported and mapped before the deregistration
  EXPECT_EQ(RemoteCheck(used.addr, bytes, 81), -1);
  EXPECT_EQ(target_.Call("dereg " + std::to_string(used.region)), "0");
  EXPECT_EQ(target_.Call("dereg " + std::to_string(fresh.region)), "0");
  EXPECT_EQ(PostWait(&hu).code(), Code::kRemoteStale);
  EXPECT_EQ(PostWait(&hf).code(), Code::kRemoteStale);  // never mapped
  EXPECT_TRUE(agent_->PeerError("target").ok());        // stale is per request, not fatal
  EXPECT_TRUE(agent_->Release(&hu).ok());
  EXPECT_TRUE(agent_->Release(&hf).ok());
  EXPECT_NE(target_.Call("reg " + std::to_string(used.addr) + " " + std::to_string(bytes)), "0");
  Load();
  FillDevice(src, bytes, 82);
  XferHandle again = MakeOne(Op::kWrite, src, used.addr, bytes);
  ASSERT_TRUE(PostWait(&again).ok());
  EXPECT_EQ(RemoteCheck(used.addr, bytes, 82), -1);
}

// A VMM allocation created without an exportable handle type: the transfer
// ends with not-supported and says how to create the memory; the channel lives on.
TEST_P(CudaVmmTest, UnexportableVmmIsAClearError) {
  MakeAgent();
  const uint64_t bytes = part_;
  uint8_t* src = nullptr;
  ASSERT_NO_FATAL_FAILURE(DevAllocRegistered(&src, bytes));
  Remote bad = VmmRemote(bytes, 1, kNoHandle), good = Alloc(bytes);
  ASSERT_NE(bad.region, 0u);
  EXPECT_EQ(ExportOf(bad.addr).kind, core::ExportKind::kNone);
  Load();
  XferHandle hb = MakeOne(Op::kWrite, src, bad.addr, bytes);
  Status s = PostWait(&hb);
  EXPECT_EQ(s.code(), Code::kNotSupported) << s.ToString();
  EXPECT_NE(s.message().find("CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR"), std::string::npos)
      << s.ToString();
  EXPECT_TRUE(agent_->PeerError("target").ok());
  FillDevice(src, bytes, 91);
  XferHandle hg = MakeOne(Op::kWrite, src, good.addr, bytes);
  ASSERT_TRUE(PostWait(&hg).ok());
  EXPECT_EQ(RemoteCheck(good.addr, bytes, 91), -1);
}

INSTANTIATE_TEST_SUITE_P(Topologies, CudaVmmTest, ::testing::Values("two_gpus", "one_gpu"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace kvlane::test
