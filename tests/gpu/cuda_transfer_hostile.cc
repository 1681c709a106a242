// cuda_transfer_test's cases of a hostile target: metadata that lies. The
// target process is honest; this process rewrites its metadata before loading
// it, as a peer that wrote its own blob could. Nothing outside what the target
// exported may be read or written: the transfer fails instead.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "core/agent_impl.h"
#include "core/metadata.h"
#include "cuda_transfer_fixture.h"
#include "target_proc.h"
#include "transport/cuda/cuda_blob.h"
#include "transport/cuda/cuda_channel.h"

namespace kvlane::test {
namespace {

class CudaHostileTest : public CudaTransferTest {
 protected:
  // The target's metadata, decoded.
  core::AgentMeta TargetMeta() {
    auto meta = core::DecodeMeta(Unhex(target_.Call("meta")));
    EXPECT_TRUE(meta.ok()) << meta.status().ToString();
    return meta.ok() ? std::move(meta).value() : core::AgentMeta{};
  }
  // Loads `meta` as the peer "target".
  void LoadMeta(const core::AgentMeta& meta) {
    auto name = agent_->LoadPeer(core::EncodeMeta(meta));
    ASSERT_TRUE(name.ok()) << name.status().ToString();
    ASSERT_EQ(name.value(), "target");
  }
  // READs remote [addr, addr + len) into `dst`: the status of the first step
  // that failed (preparing, making or posting), or of the transfer.
  Status ReadInto(uint8_t* dst, uint64_t addr, uint64_t len) {
    DescList l{MemoryKind::kCuda, {}}, r{MemoryKind::kCuda, {}};
    l.Add(dst, len);
    r.Add(addr, len);
    auto pl = agent_->PrepareLocal(l);
    if (!pl.ok()) return pl.status();
    auto pr = agent_->PrepareRemote("target", r);
    if (!pr.ok()) return pr.status();
    auto h = agent_->MakeTransfer(Op::kRead, pl.value(), {}, pr.value(), {});
    if (!h.ok()) return h.status();
    XferHandle x = h.value();
    Status s = PostWait(&x);
    (void)agent_->Release(&x);
    return s;
  }
  // How many legacy IPC handles the channel to "target" holds open (-1: no cuda channel).
  int64_t LegacyOpened() {
    auto ch = agent_->impl()->PeerChannel("target");
    auto* cuda = ch.ok() ? dynamic_cast<core::CudaChannel*>(ch.value()) : nullptr;
    return cuda == nullptr ? -1 : static_cast<int64_t>(cuda->LegacyOpenedForTest());
  }
  // Whether every byte of device memory [p, p + len) is `v`.
  static bool AllBytes(const uint8_t* p, uint64_t len, uint8_t v) {
    std::vector<uint8_t> h(len);
    if (cudaMemcpy(h.data(), p, len, cudaMemcpyDeviceToHost) != cudaSuccess) return false;
    return std::all_of(h.begin(), h.end(), [v](uint8_t b) { return b == v; });
  }
};

// A target that copies this process's token into its metadata and names an
// address of this process as its piece must not get that address used as is
// (only an agent of this process is served by address).
TEST_P(CudaHostileTest, ForgedProcessTokenGetsNoRawAddress) {
  MakeAgent();
  constexpr uint64_t kBytes = 64 << 10;
  uint8_t* dst = DevAlloc(kBytes);
  uint8_t* secret = DevAlloc(kBytes);  // this process's, never registered
  FillDevice(secret, kBytes, 7);
  cudaMemset(dst, 0xCC, kBytes);
  cudaDeviceSynchronize();
  ASSERT_TRUE(agent_->RegisterMemory(dst, kBytes, MemoryKind::kCuda).ok());
  Remote r = Alloc(kBytes);
  auto mine = core::DecodeMeta(agent_->ExportMetadata().value());
  ASSERT_TRUE(mine.ok());
  core::AgentMeta meta = TargetMeta();
  meta.process_token = mine->process_token;
  bool found = false;
  for (core::Piece& p : meta.pieces)
    if (p.base == r.addr) p.base = reinterpret_cast<uint64_t>(secret), found = true;
  ASSERT_TRUE(found);
  LoadMeta(meta);
  Status s = ReadInto(dst, reinterpret_cast<uint64_t>(secret), kBytes);
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(AllBytes(dst, kBytes, 0xCC)) << "dst changed (the secret buffer was read?)";
}

// A target whose export claims a larger cudaMalloc allocation (and piece) than
// the IPC handle opens: the part past the real allocation is not reachable, and
// the handle opened to check the claim is closed again.
TEST_P(CudaHostileTest, LegacyAllocationLongerThanItsHandleIsRefused) {
  MakeAgent();
  constexpr uint64_t kBytes = 64 << 10, kClaim = uint64_t{1} << 30;
  uint8_t* dst = DevAlloc(kBytes);
  cudaMemset(dst, 0xCC, kBytes);
  cudaDeviceSynchronize();
  ASSERT_TRUE(agent_->RegisterMemory(dst, kBytes, MemoryKind::kCuda).ok());
  Remote r = Alloc(kBytes);
  core::AgentMeta meta = TargetMeta();
  auto blob = core::DecodeCudaBlob(meta.cuda_blob);
  ASSERT_TRUE(blob.ok()) << blob.status().ToString();
  bool found = false;
  for (core::CudaExport& e : blob->exports) {
    if (e.piece_base != r.addr) continue;
    ASSERT_EQ(e.kind, core::ExportKind::kLegacyIpc);
    ASSERT_EQ(e.alloc_base, r.addr);
    e.piece_len = e.alloc_len = kClaim;
    found = true;
  }
  ASSERT_TRUE(found);
  for (core::Piece& p : meta.pieces)
    if (p.base == r.addr) p.len = kClaim;
  meta.cuda_blob = core::EncodeCudaBlob(blob.value());
  LoadMeta(meta);
  // Inside the claim, past the allocation (and its 2 MiB page).
  Status s = ReadInto(dst, r.addr + (kClaim / 2), kBytes);
  EXPECT_EQ(s.code(), Code::kNotAllowed) << s.ToString();
  EXPECT_TRUE(AllBytes(dst, kBytes, 0xCC)) << "dst changed";
  EXPECT_EQ(LegacyOpened(), 0) << "the refused handle stays open";
  // The channel stays usable for what the target really has.
  core::AgentMeta honest = TargetMeta();
  ASSERT_TRUE(agent_->LoadPeer(core::EncodeMeta(honest)).ok());
  ASSERT_EQ(RemoteFill(r.addr, kBytes, 9), "ok");
  EXPECT_TRUE(ReadInto(dst, r.addr, kBytes).ok());
  EXPECT_EQ(CheckDevice(dst, kBytes, 9), -1);
  EXPECT_EQ(LegacyOpened(), 1);
}

INSTANTIATE_TEST_SUITE_P(Topologies, CudaHostileTest, ::testing::Values("two_gpus", "one_gpu"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace kvlane::test
