// The engine's correctness cases on the cuda transport: this process is the
// initiator (GPU 0), a child process is the target (GPU 1, or GPU 0 too:
// two processes sharing one device).
// The VMM cases are in cuda_transfer_vmm.cc, the proxy lane's in
// cuda_transfer_proxy.cc; the fixture in cuda_transfer_fixture.h.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstring>
#include <future>
#include <numeric>
#include <thread>

#include "core/agent_impl.h"
#include "cuda_transfer_fixture.h"
#include "target_proc.h"
#include "test_util.h"
#include "transport/cuda/cuda_channel.h"

namespace kvlane::test {
namespace {

using namespace std::chrono_literals;

// Adjacent on both sides: merging is off so that 513 segments move (the copy
// kernel's path, not one copy-engine copy).
TEST_P(CudaTransferTest, Moves513DescriptorsBothWays) {
  AgentOptions o;
  o.merge_adjacent = false;
  MakeAgent(o);
  constexpr int kDescs = 513;
  std::vector<uint64_t> lens(kDescs);
  for (int i = 0; i < kDescs; ++i) lens[i] = 64 + (i * 37) % 4000;
  uint64_t total = std::accumulate(lens.begin(), lens.end(), uint64_t{0});
  uint8_t* src = nullptr;
  ASSERT_NO_FATAL_FAILURE(DevAllocRegistered(&src, total, 7));
  uint8_t* back = DevAlloc(total);
  cudaMemset(back, 0xCC, total);
  // async to the host; the engine's streams do not wait for it
  cudaStreamSynchronize(cudaStreamLegacy);
  ASSERT_NO_FATAL_FAILURE(Register(back, total));
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
  auto plan = agent_->Describe(w);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->segments, static_cast<uint32_t>(kDescs));
  ASSERT_TRUE(PostWait(&w).ok());
  EXPECT_EQ(RemoteCheck(dst.addr, total, 7), -1);
  XferHandle r = Make(Op::kRead, lb, rd);
  ASSERT_TRUE(PostWait(&r).ok());
  EXPECT_EQ(CheckDevice(back, total, 7), -1);
  EXPECT_EQ(agent_->PeerTransport("target").value(), "cuda");
  EXPECT_TRUE(agent_->Release(&w).ok());
  EXPECT_TRUE(agent_->Release(&r).ok());
}

// 37,440-byte pages in runs of 8 adjacent ones, the runs in reverse order on
// the remote side: one segment per run, every byte where it belongs, both ways.
TEST_P(CudaTransferTest, MergedRunsOfPagesMoveExactly) {
  MakeAgent();
  constexpr uint64_t kPage = 37440, kRun = 8, kRuns = 24, kBytes = kPage * kRun * kRuns;
  uint8_t* src = DevAlloc(kBytes);
  uint8_t* back = DevAlloc(kBytes);
  for (uint64_t p = 0; p < kRun * kRuns; ++p) FillDevice(src + p * kPage, kPage, 1000 + p);
  cudaMemset(back, 0xCC, kBytes);
  cudaStreamSynchronize(cudaStreamLegacy);
  ASSERT_NO_FATAL_FAILURE(Register(src, kBytes));
  ASSERT_NO_FATAL_FAILURE(Register(back, kBytes));
  Remote dst = Alloc(kBytes);
  Load();
  DescList ls{MemoryKind::kCuda, {}}, lb{MemoryKind::kCuda, {}}, rd{MemoryKind::kCuda, {}};
  for (uint64_t p = 0; p < kRun * kRuns; ++p) {
    const uint64_t remote_page = (kRuns - 1 - p / kRun) * kRun + p % kRun;
    ls.Add(src + p * kPage, kPage);
    lb.Add(back + remote_page * kPage, kPage);  // READ brings each page back to its own offset
    rd.Add(dst.addr + remote_page * kPage, kPage);
  }
  XferHandle w = Make(Op::kWrite, ls, rd);
  auto plan = agent_->Describe(w);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->segments, kRuns);
  ASSERT_TRUE(PostWait(&w).ok());
  for (uint64_t p = 0; p < kRun * kRuns; ++p) {
    const uint64_t remote_page = (kRuns - 1 - p / kRun) * kRun + p % kRun;
    ASSERT_EQ(RemoteCheck(dst.addr + remote_page * kPage, kPage, 1000 + p), -1) << "page " << p;
  }
  XferHandle r = Make(Op::kRead, lb, rd);
  ASSERT_TRUE(PostWait(&r).ok());
  for (uint64_t p = 0; p < kRun * kRuns; ++p) {
    const uint64_t remote_page = (kRuns - 1 - p / kRun) * kRun + p % kRun;
    ASSERT_EQ(CheckDevice(back + remote_page * kPage, kPage, 1000 + p), -1) << "page " << p;
  }
  EXPECT_TRUE(agent_->Release(&w).ok());
  EXPECT_TRUE(agent_->Release(&r).ok());
}

// Long descriptors (192 KiB + 13 B, the copy kernel's units and parts) whose
// two sides are not congruent mod 16: the WRITE's pairs differ by 6i + 3 (the
// odd classes: funnel-shifted words), the READ's by 8 - 2i (the even ones:
// 16-, 8- and 4-byte vectors, and shifted words). Every byte lands, and none
// of the bytes around a destination changes.
TEST_P(CudaTransferTest, MisalignedDescriptorsMoveExactly) {
  MakeAgent();
  constexpr uint64_t kDescs = 16, kLen = (192 << 10) + 13, kSlot = kLen + 64;
  constexpr uint64_t kBytes = kDescs * kSlot;
  uint8_t* src = DevAlloc(kBytes);
  uint8_t* back = DevAlloc(kBytes);
  auto at = [](uint64_t i, uint64_t shift) { return i * kSlot + 16 + shift; };
  auto local_shift = [](uint64_t i) { return i; };
  auto remote_shift = [](uint64_t i) { return (i * 7 + 3) % 16; };
  auto back_shift = [](uint64_t i) { return (i * 5 + 11) % 16; };
  for (uint64_t i = 0; i < kDescs; ++i) FillDevice(src + at(i, local_shift(i)), kLen, 600 + i);
  cudaMemset(back, 0xCC, kBytes);
  cudaStreamSynchronize(cudaStreamLegacy);
  ASSERT_NO_FATAL_FAILURE(Register(src, kBytes));
  ASSERT_NO_FATAL_FAILURE(Register(back, kBytes));
  Remote dst = Alloc(kBytes);
  ASSERT_EQ(RemoteMemset(dst.addr, kBytes, 0x5A), "ok");
  Load();
  DescList ls{MemoryKind::kCuda, {}}, lb{MemoryKind::kCuda, {}}, rd{MemoryKind::kCuda, {}};
  for (uint64_t i = 0; i < kDescs; ++i) {
    ls.Add(src + at(i, local_shift(i)), kLen);
    lb.Add(back + at(i, back_shift(i)), kLen);
    rd.Add(dst.addr + at(i, remote_shift(i)), kLen);
  }
  XferHandle w = Make(Op::kWrite, ls, rd);
  auto plan = agent_->Describe(w);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->segments, kDescs);
  ASSERT_TRUE(PostWait(&w).ok());
  for (uint64_t i = 0; i < kDescs; ++i) {
    const uint64_t r = at(i, remote_shift(i));
    ASSERT_EQ(RemoteCheck(dst.addr + r, kLen, 600 + i), -1) << "descriptor " << i;
    const uint64_t slot = i * kSlot, next = slot + kSlot;
    EXPECT_EQ(RemoteCheckByte(dst.addr + slot, r - slot, 0x5A), -1) << "before descriptor " << i;
    EXPECT_EQ(RemoteCheckByte(dst.addr + r + kLen, next - r - kLen, 0x5A), -1)
        << "after descriptor " << i;
  }
  XferHandle r = Make(Op::kRead, lb, rd);
  ASSERT_TRUE(PostWait(&r).ok());
  std::vector<uint8_t> got(kBytes);
  ASSERT_EQ(cudaMemcpy(got.data(), back, kBytes, cudaMemcpyDeviceToHost), cudaSuccess);
  for (uint64_t i = 0; i < kDescs; ++i) {
    const uint64_t b = at(i, back_shift(i));
    ASSERT_EQ(CheckDevice(back + b, kLen, 600 + i), -1) << "descriptor " << i;
    for (uint64_t k = i * kSlot; k < (i + 1) * kSlot; ++k)
      if (k < b || k >= b + kLen) ASSERT_EQ(got[k], 0xCC) << "descriptor " << i << " byte " << k;
  }
  EXPECT_TRUE(agent_->Release(&w).ok());
  EXPECT_TRUE(agent_->Release(&r).ok());
}

// Every (destination & 15, source & 15) pair, 256 descriptors of 1-40 bytes
// in one list (the copy kernel: too many segments for the proxy), lengths
// below, at and past each path's head: WRITE, then READ with the pairs
// swapped. Every byte where it belongs, none around it changed (the whole
// remote span read back in one contiguous READ).
TEST_P(CudaTransferTest, EveryAlignmentPairOfShortDescriptorsMovesExactly) {
  MakeAgent();
  constexpr uint64_t kPairs = 256, kSlot = 64, kBytes = kPairs * kSlot;
  auto len = [](uint64_t k) { return 1 + (k * 7) % 40; };
  auto at = [](uint64_t k, uint64_t shift) { return k * kSlot + 8 + shift; };
  uint8_t *src = nullptr, *back = nullptr, *whole = nullptr;
  ASSERT_NO_FATAL_FAILURE(DevAllocRegistered(&src, kBytes, 91));
  ASSERT_NO_FATAL_FAILURE(DevAllocRegistered(&back, kBytes));
  ASSERT_NO_FATAL_FAILURE(DevAllocRegistered(&whole, kBytes));
  ASSERT_EQ(cudaMemset(back, 0xCC, kBytes), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<uint8_t> source(kBytes);
  ASSERT_EQ(cudaMemcpy(source.data(), src, kBytes, cudaMemcpyDeviceToHost), cudaSuccess);
  Remote dst = Alloc(kBytes);
  ASSERT_EQ(RemoteMemset(dst.addr, kBytes, 0x5A), "ok");
  Load();
  // Pair k: destination offset k / 16, source offset k % 16 (mod 16).
  DescList ls{MemoryKind::kCuda, {}}, rd{MemoryKind::kCuda, {}}, lb{MemoryKind::kCuda, {}};
  for (uint64_t k = 0; k < kPairs; ++k) {
    ls.Add(src + at(k, k % 16), len(k));
    rd.Add(dst.addr + at(k, k / 16), len(k));
    lb.Add(back + at(k, k % 16), len(k));  // READ: destination k % 16, source k / 16
  }
  XferHandle w = Make(Op::kWrite, ls, rd);
  auto plan = agent_->Describe(w);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->segments, kPairs);
  ASSERT_TRUE(PostWait(&w).ok());
  XferHandle all = MakeOne(Op::kRead, whole, dst.addr, kBytes);
  ASSERT_TRUE(PostWait(&all).ok());
  std::vector<uint8_t> got(kBytes);
  ASSERT_EQ(cudaMemcpy(got.data(), whole, kBytes, cudaMemcpyDeviceToHost), cudaSuccess);
  // `in`: the buffer read back; a pair's destination bytes hold the source's
  // bytes at its source offset, every other byte `fill`.
  auto check = [&](const std::vector<uint8_t>& in, auto dst_shift, auto src_shift, uint8_t fill,
                   const char* what) {
    for (uint64_t k = 0; k < kPairs; ++k) {
      const uint64_t d = at(k, dst_shift(k)), s = at(k, src_shift(k));
      for (uint64_t b = k * kSlot; b < (k + 1) * kSlot; ++b) {
        const bool inside = b >= d && b < d + len(k);
        const uint8_t want = inside ? source[s + (b - d)] : fill;
        ASSERT_EQ(in[b], want) << what << ": pair " << k << " (dst " << d % 16 << ", src " << s % 16
                               << ", " << len(k) << " B), byte " << b - d;
      }
    }
  };
  auto hi = [](uint64_t k) { return k / 16; };
  auto lo = [](uint64_t k) { return k % 16; };
  ASSERT_NO_FATAL_FAILURE(check(got, hi, lo, 0x5A, "WRITE"));
  XferHandle r = Make(Op::kRead, lb, rd);
  ASSERT_TRUE(PostWait(&r).ok());
  ASSERT_EQ(cudaMemcpy(got.data(), back, kBytes, cudaMemcpyDeviceToHost), cudaSuccess);
  // back at k % 16 from the remote side at k / 16, which holds source at k % 16.
  ASSERT_NO_FATAL_FAILURE(check(got, lo, lo, 0xCC, "READ"));
  EXPECT_TRUE(agent_->Release(&w).ok());
  EXPECT_TRUE(agent_->Release(&all).ok());
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
  uint8_t* src = nullptr;
  ASSERT_NO_FATAL_FAILURE(DevAllocRegistered(&src, kSlots * kBytes));
  Remote dst = Alloc(kSlots * kBytes);
  Load();
  std::vector<XferHandle> h(kSlots);
  auto make = [&](int j) {
    return MakeOne(Op::kWrite, src + j * kBytes, dst.addr + j * kBytes, kBytes);
  };
  for (int j = 0; j < kSlots; ++j) {
    FillDevice(src + j * kBytes, kBytes, 1000 + j);
    h[j] = make(j);
  }
  for (int j = 0; j < kSlots; ++j) ASSERT_FALSE(agent_->Post(&h[j]).is_error());
  for (int j = 0; j < kSlots; ++j) ASSERT_TRUE(agent_->Wait(h[j], 20s).ok());
  for (int j = 0; j < kSlots; ++j)
    EXPECT_EQ(RemoteCheck(dst.addr + j * kBytes, kBytes, 1000 + j), -1);
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
  uint8_t* src = nullptr;
  ASSERT_NO_FATAL_FAILURE(DevAllocRegistered(&src, kBytes));
  Remote dst = Alloc(kBytes);
  Load();
  DescList l{MemoryKind::kCuda, {}}, r{MemoryKind::kCuda, {}};
  for (uint64_t end = kBytes; end > 0;) {  // uneven descriptors in reverse order: kernel path
    uint64_t len = std::min<uint64_t>(end, (96 << 10) - 16);
    end -= len;
    l.Add(src + end, len);
    r.Add(dst.addr + end, len);
  }
  XferHandle hs = Make(Op::kWrite, l, r), hc = MakeOne(Op::kWrite, src, dst.addr, kBytes);
  for (uint64_t epoch = 1; epoch <= 6; ++epoch) {
    XferHandle& h = epoch % 2 ? hs : hc;
    FillDevice(src, kBytes, epoch * 77);
    RemoteMemset(dst.addr, kBytes, 0);
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
  uint8_t* src = nullptr;
  ASSERT_NO_FATAL_FAILURE(DevAllocRegistered(&src, kBytes));
  Remote dst = Alloc(kBytes);
  Load();
  XferHandle h = MakeOne(Op::kWrite, src, dst.addr, kBytes, "epoch-1");
  for (int e = 1; e <= 3; ++e) {
    FillDevice(src, kBytes, 300 + e);
    ASSERT_FALSE(agent_->Post(&h).is_error());
    std::string got = target_.Call("notifcheck " + std::to_string(dst.addr) + " " +
                                   std::to_string(kBytes) + " " + std::to_string(300 + e));
    EXPECT_EQ(got, "epoch-1 -1");
    ASSERT_TRUE(agent_->Wait(h, 20s).ok());
  }
  ASSERT_TRUE(agent_->SendNotification("target", "standalone").ok());
  EXPECT_EQ(target_.Call("notifcheck 0 0 0"), "standalone -1");
}

TEST_P(CudaTransferTest, DeregisteredRegionIsStale) {
  MakeAgent();
  constexpr uint64_t kBytes = 64 << 10;
  uint8_t* src = nullptr;
  ASSERT_NO_FATAL_FAILURE(DevAllocRegistered(&src, kBytes));
  Remote used = Alloc(kBytes), fresh = Alloc(kBytes);
  Load();
  XferHandle hu = MakeOne(Op::kRead, src, used.addr, kBytes);
  XferHandle hf = MakeOne(Op::kRead, src, fresh.addr, kBytes);
  ASSERT_TRUE(PostWait(&hu).ok());  // table built and mapped before the deregistration
  EXPECT_EQ(target_.Call("dereg " + std::to_string(used.region)), "0");
  EXPECT_EQ(target_.Call("dereg " + std::to_string(fresh.region)), "0");
  EXPECT_EQ(PostWait(&hu).code(), Code::kRemoteStale);
  EXPECT_EQ(PostWait(&hf).code(), Code::kRemoteStale);  // never mapped
  EXPECT_TRUE(agent_->Release(&hu).ok());
  EXPECT_TRUE(agent_->Release(&hf).ok());
  EXPECT_TRUE(agent_->PeerError("target").ok());  // stale is per request, not fatal
}

// A region the target deregistered after this side loaded its metadata but
// before the channel opened (so no revocation reached it): stale, nothing lands.
TEST_P(CudaTransferTest, RegionDeregisteredBeforeTheChannelOpensIsStale) {
  MakeAgent();
  constexpr uint64_t kBytes = 64 << 10;
  uint8_t* src = nullptr;
  ASSERT_NO_FATAL_FAILURE(DevAllocRegistered(&src, kBytes, 41));
  Remote gone = Alloc(kBytes), kept = Alloc(kBytes);
  ASSERT_EQ(RemoteMemset(gone.addr, kBytes, 0), "ok");
  Load();  // the metadata names both
  ASSERT_EQ(target_.Call("dereg " + std::to_string(gone.region)), "0");
  XferHandle hg = MakeOne(Op::kWrite, src, gone.addr, kBytes);  // the channel opens here
  XferHandle hk = MakeOne(Op::kWrite, src, kept.addr, kBytes);
  EXPECT_EQ(PostWait(&hg).code(), Code::kRemoteStale);
  EXPECT_EQ(RemoteCheckByte(gone.addr, kBytes, 0), -1);
  ASSERT_TRUE(PostWait(&hk).ok());  // the live one still moves
  EXPECT_EQ(RemoteCheck(kept.addr, kBytes, 41), -1);
  EXPECT_TRUE(agent_->PeerError("target").ok());
}

// A blob loaded after the channel opened that names a region the target
// deregistered before then (no revocation reached this channel: it did not
// exist; the blob is older than the deregistration): the channel asks the
// target about keys it has not checked before the table is installed, so the
// region is stale and nothing lands. The GPU would have copied into memory the
// target no longer registered (its allocation still alive) and reported kOk.
TEST_P(CudaTransferTest, StaleBlobLoadedAfterTheChannelOpenedIsStale) {
  MakeAgent();
  constexpr uint64_t kBytes = 64 << 10;
  uint8_t* src = nullptr;
  ASSERT_NO_FATAL_FAILURE(DevAllocRegistered(&src, kBytes, 43));
  Remote kept = Alloc(kBytes);
  Load();  // names `kept` only
  Remote gone = Alloc(kBytes);
  ASSERT_EQ(RemoteMemset(gone.addr, kBytes, 0), "ok");
  const std::string older = Unhex(target_.Call("meta"));  // names both
  ASSERT_EQ(target_.Call("dereg " + std::to_string(gone.region)), "0");
  XferHandle hk = MakeOne(Op::kWrite, src, kept.addr, kBytes);  // the channel opens here
  ASSERT_TRUE(PostWait(&hk).ok());
  ASSERT_TRUE(agent_->LoadPeer(older).ok());
  XferHandle hg = MakeOne(Op::kWrite, src, gone.addr, kBytes);
  const Status stale = PostWait(&hg);
  EXPECT_EQ(stale.code(), Code::kRemoteStale);
  // Told by the target when the table was loaded (not merely never checked).
  EXPECT_NE(stale.message().find("deregistered"), std::string::npos) << stale.ToString();
  EXPECT_EQ(RemoteCheckByte(gone.addr, kBytes, 0), -1);
  ASSERT_TRUE(PostWait(&hk).ok());  // the live one still moves
  EXPECT_EQ(RemoteCheck(kept.addr, kBytes, 43), -1);
  // A region registered since the channel opened is asked about, found live, and moves.
  Remote fresh = Alloc(kBytes);
  Load();
  XferHandle hf = MakeOne(Op::kWrite, src, fresh.addr, kBytes);
  ASSERT_TRUE(PostWait(&hf).ok());
  EXPECT_EQ(RemoteCheck(fresh.addr, kBytes, 43), -1);
  EXPECT_TRUE(agent_->PeerError("target").ok());
}

// A refresh whose target never answers the live check (the process stopped)
// ends by its deadline: LoadPeer answers kTimeout, the old table is kept (a
// list naming the new region is refused) and the channel is failed, since the
// answer would now come unasked.
TEST_P(CudaTransferTest, RefreshWhoseTargetNeverAnswersEndsByItsDeadline) {
  AgentOptions o;
  o.io_timeout = std::chrono::milliseconds(500);
  MakeAgent(o);
  constexpr uint64_t kBytes = 64 << 10;
  uint8_t* src = nullptr;
  ASSERT_NO_FATAL_FAILURE(DevAllocRegistered(&src, kBytes, 44));
  Remote kept = Alloc(kBytes);
  Load();
  XferHandle hk = MakeOne(Op::kWrite, src, kept.addr, kBytes);  // the channel opens here
  ASSERT_TRUE(PostWait(&hk).ok());
  Remote fresh = Alloc(kBytes);
  const std::string newer = Unhex(target_.Call("meta"));
  ASSERT_TRUE(target_.Stop());
  const auto t0 = std::chrono::steady_clock::now();
  auto loading = std::async(std::launch::async, [&] { return agent_->LoadPeer(newer); });
  const bool ended = loading.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  const auto took = std::chrono::steady_clock::now() - t0;
  target_.Continue();  // a LoadPeer still waiting ends now, with the answer
  ASSERT_TRUE(ended) << "LoadPeer waited past its deadline for a stopped target";
  const Result<std::string> loaded = loading.get();
  EXPECT_EQ(loaded.status().code(), Code::kTimeout) << loaded.status().ToString();
  // One batch and two io_timeouts for a revocation the control thread may be
  // finishing; the whole deadline, since nothing answers.
  EXPECT_GE(took, std::chrono::milliseconds(3 * 500 - 100));
  EXPECT_LT(took, std::chrono::milliseconds(3 * 500 + 1000));
  EXPECT_FALSE(agent_->PeerError("target").ok());
  EXPECT_FALSE(agent_->PrepareRemote("target", Contig(fresh.addr, kBytes)).ok())
      << "the new table was installed";
}

// A peer that registers, deregisters and frees memory again and again: the
// initiator closes each mapping once its pieces are revoked, so the freed
// memory goes back to the device (kept open, 8 x 512 MiB would stay allocated),
// and lets go of the pieces themselves (a trail of one per registration before).
TEST_P(CudaTransferTest, ChurnedRegionsGoBackToTheDevice) {
  MakeAgent();
  constexpr uint64_t kBytes = 512ull << 20;
  uint8_t* src = nullptr;
  ASSERT_NO_FATAL_FAILURE(DevAllocRegistered(&src, kBytes));
  const uint64_t free_before = std::stoull(target_.Call("meminfo"));
  ASSERT_GT(free_before, 16 * kBytes);
  for (int round = 0; round < 8; ++round) {
    Remote r = Alloc(kBytes);
    ASSERT_NE(r.region, 0u);
    Load();
    XferHandle h = MakeOne(Op::kWrite, src, r.addr, kBytes);
    ASSERT_TRUE(PostWait(&h).ok()) << "round " << round;  // maps the allocation
    ASSERT_TRUE(agent_->Release(&h).ok());
    ASSERT_EQ(target_.Call("dereg " + std::to_string(r.region)), "0");
    ASSERT_EQ(target_.Call("free " + std::to_string(r.addr)), "0");
  }
  const uint64_t free_after = std::stoull(target_.Call("meminfo"));
  EXPECT_GE(free_after + 2 * kBytes, free_before)
      << "the freed allocations stay alive: " << (free_before - free_after) / (1 << 20) << " MiB";
  EXPECT_TRUE(agent_->PeerError("target").ok());
  auto ch = agent_->impl()->PeerChannel("target");
  ASSERT_TRUE(ch.ok()) << ch.status().ToString();
  auto* cuda = dynamic_cast<core::CudaChannel*>(ch.value());
  ASSERT_NE(cuda, nullptr);
  const auto held = cuda->PeerHeldForTest();
  EXPECT_EQ(held.opened, 0u);
  EXPECT_EQ(held.mappings, 0u);
  // Those the last two tables name (the last two rounds'), not one per round.
  EXPECT_LE(held.revoked_keys, 2u);
}

// This side registering a buffer, reading into it and deregistering it, again
// and again over one channel: every READ lands exactly, and the cuda channel
// keeps what it judged of local pieces only for about those still registered
// (LocalSpans sweeps the others), not one entry per registration ever made.
TEST_P(CudaTransferTest, LocalRegistrationCyclesAreExactAndLeaveNoTrail) {
  MakeAgent();
  constexpr uint64_t kBytes = 4096;
  constexpr int kCycles = 600;  // past twice LocalSpans::kMinSweepMark
  Remote src = Alloc(kBytes);
  Load();
  uint8_t* buf = DevAlloc(kBytes);
  for (int cycle = 0; cycle < kCycles; ++cycle) {
    ASSERT_EQ(RemoteFill(src.addr, kBytes, cycle), "ok");
    auto region = agent_->RegisterMemory(buf, kBytes, MemoryKind::kCuda);
    ASSERT_TRUE(region.ok()) << region.status().ToString();
    XferHandle h = MakeOne(Op::kRead, buf, src.addr, kBytes);
    ASSERT_TRUE(PostWait(&h).ok()) << "cycle " << cycle;
    ASSERT_EQ(CheckDevice(buf, kBytes, cycle), -1) << "cycle " << cycle;
    ASSERT_TRUE(agent_->Release(&h).ok());
    ASSERT_TRUE(agent_->DeregisterMemory(region.value()).ok());
  }
  auto ch = agent_->impl()->PeerChannel("target");
  ASSERT_TRUE(ch.ok()) << ch.status().ToString();
  auto* cuda = dynamic_cast<core::CudaChannel*>(ch.value());
  ASSERT_NE(cuda, nullptr);
  EXPECT_LE(cuda->LocalPiecesForTest(), core::LocalSpans::kMinSweepMark + 1);
  EXPECT_TRUE(agent_->PeerError("target").ok());
}

TEST_P(CudaTransferTest, LatchedErrorRejectsPostAndNotification) {
  MakeAgent();
  constexpr uint64_t kBytes = 64 << 10;
  uint8_t* src = nullptr;
  ASSERT_NO_FATAL_FAILURE(DevAllocRegistered(&src, kBytes, 9));
  Remote dst = Alloc(kBytes);
  RemoteMemset(dst.addr, kBytes, 90);
  Load();
  XferHandle h = MakeOne(Op::kWrite, src, dst.addr, kBytes, "late");
  auto ch = agent_->impl()->PeerChannel("target");
  ASSERT_TRUE(ch.ok());
  ch.value()->latch().Latch(Status::Backend("injected lane fault"));
  XferHandle before = h;
  EXPECT_EQ(agent_->Post(&h).code(), Code::kBackend);
  EXPECT_EQ(h.gen, before.gen);  // still the caller's, unchanged
  EXPECT_EQ(agent_->SendNotification("target", "x").code(), Code::kBackend);
  EXPECT_EQ(RemoteCheckByte(dst.addr, kBytes, 90), -1);
  EXPECT_TRUE(agent_->Release(&h).ok());
}

TEST_P(CudaTransferTest, DeadPeerEndsWithRemoteDisconnect) {
  MakeAgent();
  constexpr uint64_t kBytes = 64 << 10;
  uint8_t* src = nullptr;
  ASSERT_NO_FATAL_FAILURE(DevAllocRegistered(&src, kBytes));
  Remote dst = Alloc(kBytes);
  Load();
  XferHandle h = MakeOne(Op::kWrite, src, dst.addr, kBytes);
  ASSERT_TRUE(PostWait(&h).ok());
  target_.Kill();
  auto until = std::chrono::steady_clock::now() + 5s;
  while (agent_->PeerError("target").ok() && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(1ms);
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
  const DescList l = Contig(host, kBytes, MemoryKind::kHost), r = Contig(dst.addr, kBytes);
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

// A lane whose retire thread sleeps (spin 0, no proxy running: the copy-engine
// and copy-kernel lanes here) has the GPU publish a post's record itself,
// before the retire thread wakes and lets go of the request. Each handle is
// posted again the moment its record reads done (Post then waits for that
// retire thread), and half of the rounds wait asleep in Wait(): no repost or
// sleeper may see an older post's state, and every byte lands. The 4 KiB
// handle (the proxy lane, whose retire thread spins) is the control.
TEST_P(CudaTransferTest, DeviceRecordsRepostAtOnceOnEveryPath) {
  AgentOptions o;
  o.spin = std::chrono::microseconds(0);
  o.lanes_per_peer = 3;
  MakeAgent(o);
  constexpr uint64_t kBig = 1 << 20, kPiece = 4096;
  uint8_t* src = DevAlloc(3 * kBig);
  uint8_t* back = nullptr;
  for (int k = 0; k < 3; ++k) FillDevice(src + k * kBig, kBig, 23 + k);
  ASSERT_NO_FATAL_FAILURE(Register(src, 3 * kBig));
  ASSERT_NO_FATAL_FAILURE(DevAllocRegistered(&back, kBig));
  Remote dst = Alloc(3 * kBig);
  Load();
  DescList lk{MemoryKind::kCuda, {}}, rk{MemoryKind::kCuda, {}}, lback{MemoryKind::kCuda, {}};
  for (uint64_t k = 0; k < kBig / kPiece; ++k) {  // every page, in reverse order on the remote side
    lk.Add(src + 2 * kBig + k * kPiece, kPiece);
    lback.Add(back + k * kPiece, kPiece);
    rk.Add(dst.addr + 3 * kBig - (k + 1) * kPiece, kPiece);
  }
  XferHandle hs[3] = {
      MakeOne(Op::kWrite, src, dst.addr, kPiece, {}, XferOptions{0, false}),
      MakeOne(Op::kWrite, src + kBig, dst.addr + kBig, kBig, {}, XferOptions{1, false}),
      Make(Op::kWrite, lk, rk, {}, XferOptions{2, false})};
  for (int round = 0; round < 600; ++round) {
    XferHandle& h = hs[round % 3];
    for (int again = 0; again < 2; ++again) {
      ASSERT_FALSE(agent_->Post(&h).is_error()) << "round " << round;
      Status s;
      if (round % 2 == 0) {
        while ((s = agent_->Check(h)).in_progress()) {
        }
      } else {
        s = agent_->Wait(h, 20s);
      }
      ASSERT_TRUE(s.ok()) << "round " << round << ": " << s.ToString();
    }
  }
  for (XferHandle& h : hs) EXPECT_TRUE(agent_->Release(&h).ok());
  EXPECT_EQ(RemoteCheck(dst.addr, kPiece, 23), -1);
  EXPECT_EQ(RemoteCheck(dst.addr + kBig, kBig, 24), -1);
  XferHandle rd = Make(Op::kRead, lback, rk);  // the scattered pages, read back in order
  ASSERT_TRUE(PostWait(&rd).ok());
  EXPECT_EQ(CheckDevice(back, kBig, 25), -1);
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
