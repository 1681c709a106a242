// Read-only device memory (Access::kReadOnly) between two processes, over the
// cuda transport and over tcp (staged): a READ returns its bytes, a WRITE is
// refused at MakeTransfer and the target's bytes stay. With the flag stripped
// from the initiator's copy of the metadata (a peer that ignores it), tcp's
// target refuses the frame; through CUDA IPC the target cannot refuse anything,
// and the WRITE lands: the limit docs/SECURITY.md states.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include "core/metadata.h"
#include "cuda_transfer_fixture.h"
#include "target_proc.h"

namespace kvlane::test {
namespace {

constexpr uint64_t kBytes = 256 << 10;

class CudaReadOnlyTest : public CudaTransferTest {
 protected:
  // A local device buffer filled with seed 5 and a remote read-only one with
  // seed 8; the target's metadata loaded.
  void Prepare() {
    MakeAgent();
    local_ = DevAlloc(kBytes);
    FillDevice(local_, kBytes, 5);
    ASSERT_TRUE(agent_->RegisterMemory(local_, kBytes, MemoryKind::kCuda).ok());
    ro_ = Alloc(kBytes, /*read_only=*/true);
    ASSERT_NE(ro_.region, 0u);
    ASSERT_EQ(RemoteFill(ro_.addr, kBytes, 8), "ok");
    l_.Add(local_, kBytes);
    r_.Add(ro_.addr, kBytes);
  }

  uint8_t* local_ = nullptr;
  Remote ro_;
  DescList l_{MemoryKind::kCuda, {}}, r_{MemoryKind::kCuda, {}};
};

TEST_P(CudaReadOnlyTest, ReadWorksAndWriteIsRefused) {
  ASSERT_NO_FATAL_FAILURE(Prepare());
  Load();
  auto pl = agent_->PrepareLocal(l_);
  auto pr = agent_->PrepareRemote("target", r_);
  ASSERT_TRUE(pl.ok() && pr.ok());
  auto w = agent_->MakeTransfer(Op::kWrite, pl.value(), {}, pr.value(), {});
  EXPECT_EQ(w.status().code(), Code::kNotAllowed) << w.status().ToString();
  XferHandle h = Make(Op::kRead, l_, r_);
  ASSERT_TRUE(PostWait(&h).ok());
  EXPECT_EQ(CheckDevice(local_, kBytes, 8), -1);
  EXPECT_EQ(RemoteCheck(ro_.addr, kBytes, 8), -1);
}

TEST_P(CudaReadOnlyTest, StrippedFlagIsRefusedOnTcpOnly) {
  ASSERT_NO_FATAL_FAILURE(Prepare());
  auto meta = core::DecodeMeta(Unhex(target_.Call("meta")));
  ASSERT_TRUE(meta.ok()) << meta.status().ToString();
  for (core::Piece& p : meta->pieces) p.access = Access::kReadWrite;
  ASSERT_TRUE(agent_->LoadPeer(core::EncodeMeta(meta.value())).ok());
  XferHandle h = Make(Op::kWrite, l_, r_);
  if (transport() == "tcp") {
    EXPECT_EQ(PostWait(&h).code(), Code::kNotAllowed);
    EXPECT_EQ(RemoteCheck(ro_.addr, kBytes, 8), -1) << "the read-only memory changed";
  } else {  // not enforceable by the target: the mapping is writable
    EXPECT_TRUE(PostWait(&h).ok());
    EXPECT_EQ(RemoteCheck(ro_.addr, kBytes, 5), -1);
  }
}

INSTANTIATE_TEST_SUITE_P(Topologies, CudaReadOnlyTest,
                         ::testing::Values("one_gpu", "two_gpus", "tcp_one_gpu", "tcp_two_gpus"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace kvlane::test
