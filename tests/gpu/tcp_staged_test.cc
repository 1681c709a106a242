// tcp with device memory on a GPU machine: both agents on the tcp transport
// only, in two processes (one GPU shared, or one each), so every byte goes
// device -> pinned half -> socket -> pinned half -> device
// (transport/stream/staged_io.h, transport/cuda/cuda_copier.h).
// tests/staged_tcp_test.cc covers the same path on CPU machines with a fake copier.
#include <cuda_runtime_api.h>

#include <string>
#include <vector>

#include "cuda_transfer_fixture.h"
#include "test_util.h"

namespace kvlane::test {
namespace {

using namespace std::chrono_literals;

class TcpStagedTest : public CudaTransferTest {};

// 513 scattered descriptors, both ops, posted three times with new bytes:
// tcp carries them (not cuda), and every byte arrives.
TEST_P(TcpStagedTest, ScatteredDeviceToDeviceBothWays) {
  MakeAgent();
  constexpr uint32_t kDescs = 513;
  constexpr uint64_t kLen = 4104;  // not a multiple of the staging half
  constexpr uint64_t kBytes = kDescs * kLen;
  uint8_t* local = nullptr;
  ASSERT_NO_FATAL_FAILURE(DevAllocRegistered(&local, kBytes));
  Remote remote = Alloc(kBytes);
  ASSERT_NE(remote.region, 0u);
  Load();
  auto used = agent_->PeerTransport("target", MemoryKind::kCuda);
  ASSERT_TRUE(used.ok()) << used.status().ToString();
  EXPECT_EQ(*used, "tcp");
  DescList l{MemoryKind::kCuda, {}}, r{MemoryKind::kCuda, {}};
  for (uint32_t i = 0; i < kDescs; ++i) {
    l.Add(local + i * kLen, kLen);
    r.Add(remote.addr + i * kLen, kLen);  // same order: whole-buffer checks below
  }
  XferHandle w = Make(Op::kWrite, l, r);
  XferHandle rd = Make(Op::kRead, l, r);
  for (uint64_t epoch = 1; epoch <= 3; ++epoch) {
    FillDevice(local, kBytes, 500 + epoch);
    ASSERT_TRUE(PostWait(&w).ok());
    ASSERT_EQ(RemoteCheck(remote.addr, kBytes, 500 + epoch), -1) << "write, epoch " << epoch;
    ASSERT_EQ(RemoteFill(remote.addr, kBytes, 600 + epoch), "ok");
    ASSERT_TRUE(PostWait(&rd).ok());
    ASSERT_EQ(CheckDevice(local, kBytes, 600 + epoch), -1) << "read, epoch " << epoch;
  }
}

// Unmerged ranges of every size class the copier treats apart, both ops, with
// both sides staging, for each AgentOptions::staging_copy of the initiator
// (the target's is the default): short ranges (4,104 B; 100 B, at every
// alignment, 256 to a frame), long ones (96 KiB), and a list mixing the two. A
// window spans one frame (at most kMaxWireSegs ranges), so the kernel copier's
// table never fills here; cuda_copier_probe's 100 B rows fill it.
TEST_P(TcpStagedTest, ShortAndLongRangesLandInPlace) {
  struct Shape {
    const char* name;
    std::vector<uint64_t> lens;
  };
  std::vector<Shape> shapes = {{"4104 B x 513", std::vector<uint64_t>(513, 4104)},
                               {"100 B x 30000", std::vector<uint64_t>(30000, 100)},
                               {"mixed", {}}};
  for (int i = 0; i < 64; ++i) shapes[2].lens.push_back(i % 2 == 0 ? 1000 + i : (96u << 10) + i);
  uint64_t seed = 700;
  for (StagingCopy how : {StagingCopy::kBatch, StagingCopy::kEach, StagingCopy::kKernel}) {
    AgentOptions o;
    o.merge_adjacent = false;  // each descriptor stays a range of its own
    o.staging_copy = how;
    MakeAgent(o);
    for (const Shape& shape : shapes) {
      SCOPED_TRACE(std::string(StagingCopyName(how)) + ", " + shape.name);
      uint64_t bytes = 0;
      for (uint64_t n : shape.lens) bytes += n;
      uint8_t* local = nullptr;
      ASSERT_NO_FATAL_FAILURE(DevAllocRegistered(&local, bytes));
      Remote remote = Alloc(bytes);
      ASSERT_NE(remote.region, 0u);
      Load();
      DescList l{MemoryKind::kCuda, {}}, r{MemoryKind::kCuda, {}};
      uint64_t at = 0;
      for (uint64_t n : shape.lens) {
        l.Add(local + at, n);
        r.Add(remote.addr + at, n);
        at += n;
      }
      XferHandle w = Make(Op::kWrite, l, r);
      XferHandle rd = Make(Op::kRead, l, r);
      for (int epoch = 1; epoch <= 2; ++epoch) {
        FillDevice(local, bytes, ++seed);
        ASSERT_TRUE(PostWait(&w).ok());
        ASSERT_EQ(RemoteCheck(remote.addr, bytes, seed), -1) << "write, epoch " << epoch;
        ASSERT_EQ(RemoteFill(remote.addr, bytes, ++seed), "ok");
        ASSERT_TRUE(PostWait(&rd).ok());
        ASSERT_EQ(CheckDevice(local, bytes, seed), -1) << "read, epoch " << epoch;
      }
      ASSERT_TRUE(agent_->Release(&w).ok());
      ASSERT_TRUE(agent_->Release(&rd).ok());
    }
  }
}

// A transfer bigger than a chunk and than the staging halves, striped over the
// lanes: every window of every lane lands in place.
TEST_P(TcpStagedTest, LargeTransferAcrossWindowsAndLanes) {
  MakeAgent();
  constexpr uint64_t kBytes = 48ull << 20;
  uint8_t* local = nullptr;
  ASSERT_NO_FATAL_FAILURE(DevAllocRegistered(&local, kBytes));
  Remote remote = Alloc(kBytes);
  Load();
  XferHandle w = MakeOne(Op::kWrite, local, remote.addr, kBytes);
  FillDevice(local, kBytes, 71);
  ASSERT_TRUE(PostWait(&w).ok());
  EXPECT_EQ(RemoteCheck(remote.addr, kBytes, 71), -1);
}

// Host memory on the initiator, device memory on the target: only the target
// stages. And a notification arrives only once the data is on the device.
TEST_P(TcpStagedTest, HostToDeviceWithNotification) {
  MakeAgent();
  constexpr uint64_t kBytes = 3ull << 20;
  std::vector<uint8_t> host(kBytes);
  ASSERT_TRUE(agent_->RegisterMemory(host.data(), kBytes, MemoryKind::kHost).ok());
  Remote remote = Alloc(kBytes);
  Load();
  XferHandle w = Make(Op::kWrite, Contig(host.data(), kBytes, MemoryKind::kHost),
                      Contig(remote.addr, kBytes), "landed");
  for (int e = 1; e <= 3; ++e) {
    Fill(host, 800 + e);
    ASSERT_FALSE(agent_->Post(&w).is_error());
    EXPECT_EQ(target_.Call("notifcheck " + std::to_string(remote.addr) + " " +
                           std::to_string(kBytes) + " " + std::to_string(800 + e)),
              "landed -1");
    ASSERT_TRUE(agent_->Wait(w, 20s).ok());
  }
  agent_.reset();  // before `host` goes
}

// Memory the target deregistered is stale over tcp too; nothing lands there.
TEST_P(TcpStagedTest, DeregisteredDeviceRegionIsStale) {
  MakeAgent();
  constexpr uint64_t kBytes = 1 << 20;
  uint8_t* local = nullptr;
  ASSERT_NO_FATAL_FAILURE(DevAllocRegistered(&local, kBytes));
  Remote remote = Alloc(kBytes);
  Load();
  XferHandle w = MakeOne(Op::kWrite, local, remote.addr, kBytes);
  ASSERT_EQ(RemoteMemset(remote.addr, kBytes, 0), "ok");
  ASSERT_EQ(target_.Call("dereg " + std::to_string(remote.region)), "0");
  FillDevice(local, kBytes, 91);
  EXPECT_EQ(PostWait(&w).code(), Code::kRemoteStale);
  EXPECT_EQ(RemoteCheckByte(remote.addr, kBytes, 0), -1);
}

INSTANTIATE_TEST_SUITE_P(Tcp, TcpStagedTest, ::testing::Values("tcp_one_gpu", "tcp_two_gpus"));

}  // namespace
}  // namespace kvlane::test
