// tcp with device memory, staged through a copier's host halves
// (transport/stream/staged_io.h). On CPU machines a fake copier stands in for
// the GPU: "device" memory is host memory registered as kCuda, and the fake
// copies it with memcpy, counting every copy (so a test sees the staged path
// ran), and fails on demand. tests/gpu/tcp_staged_test.cc runs the same
// path on a GPU.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include "core/device_copier.h"
#include "core/staging_quota.h"
#include "fake_copier.h"
#include "test_util.h"

namespace kvlane::test {
namespace {

class StagedTcp : public ::testing::Test {
 protected:
  void SetUp() override {
    core::SetDeviceStagingForTest(&staging_);
    pair_ = MakePair("tcp");
    ASSERT_TRUE(pair_.a && pair_.b);
  }
  void TearDown() override {
    pair_ = Pair{};
    core::SetDeviceStagingForTest(nullptr);
  }
  // Registers `n` bytes of `agent` as `kind`; returns them.
  uint8_t* Region(Agent& agent, size_t n, MemoryKind kind, uint8_t fill) {
    auto& b = bufs_.Make(n, fill);
    EXPECT_TRUE(agent.RegisterMemory(b.data(), n, kind).ok());
    return b.data();
  }
  // One transfer of `descs` descriptors of `len` bytes, local descriptor i at
  // i * len, remote descriptor i at (descs - 1 - i) * len.
  Result<XferHandle> Scattered(Op op, uint8_t* local, MemoryKind lk, uint8_t* remote, MemoryKind rk,
                               uint32_t descs, uint64_t len) {
    DescList l, r;
    l.kind = lk;
    r.kind = rk;
    for (uint32_t i = 0; i < descs; ++i) {
      l.Add(local + i * len, len);
      r.Add(remote + (descs - 1 - i) * len, len);
    }
    KVLANE_ASSIGN_OR_RETURN(PreparedId lp, a().PrepareLocal(l));
    KVLANE_ASSIGN_OR_RETURN(PreparedId rp, a().PrepareRemote("b", r));
    return a().MakeTransfer(op, lp, {}, rp, {});
  }
  // Checks that descriptor i of `dst` holds descriptor (descs - 1 - i) of the pattern `seed`.
  static void ExpectMirrored(const uint8_t* dst, uint32_t descs, uint64_t len, uint64_t seed) {
    for (uint32_t i = 0; i < descs; ++i)
      ASSERT_EQ(FirstMismatch(dst + i * len, len, seed, (descs - 1 - i) * len), -1) << "desc " << i;
  }
  Agent& a() { return *pair_.a; }
  Agent& b() { return *pair_.b; }

  FakeStaging staging_;
  Buffers bufs_;  // before pair_: outlives the agents
  Pair pair_;
};

// Every combination of host and device memory on the two sides, both ops:
// the bytes arrive, and the fake saw exactly the device side's bytes.
TEST_F(StagedTcp, MovesEveryKindPairBothWays) {
  constexpr uint32_t kDescs = 513;
  constexpr uint64_t kLen = 520;  // not a multiple of the half: windows split descriptors
  constexpr uint64_t kBytes = kDescs * kLen;
  const MemoryKind kinds[] = {MemoryKind::kHost, MemoryKind::kCuda};
  uint64_t seed = 1;
  for (MemoryKind lk : kinds) {
    for (MemoryKind rk : kinds) {
      for (Op op : {Op::kWrite, Op::kRead}) {
        SCOPED_TRACE(std::string(MemoryKindName(lk)) + " <-> " + MemoryKindName(rk) +
                     (op == Op::kWrite ? " write" : " read"));
        uint8_t* local = Region(a(), kBytes, lk, 0);
        uint8_t* remote = Region(b(), kBytes, rk, 0);
        Connect(a(), b());
        uint8_t* src = op == Op::kWrite ? local : remote;
        Fill(src, kBytes, ++seed);
        const uint64_t host0 = staging_.counters.to_host, dev0 = staging_.counters.to_device;
        auto h = Scattered(op, local, lk, remote, rk, kDescs, kLen);
        ASSERT_TRUE(h.ok()) << h.status().ToString();
        ASSERT_TRUE(PostAndWait(a(), &*h).ok());
        if (op == Op::kWrite) {
          ExpectMirrored(remote, kDescs, kLen, seed);
        } else {
          // Descriptor i of local came from remote descriptor descs-1-i.
          for (uint32_t i = 0; i < kDescs; ++i)
            ASSERT_EQ(FirstMismatch(local + i * kLen, kLen, seed, (kDescs - 1 - i) * kLen), -1);
        }
        const bool src_dev = (op == Op::kWrite ? lk : rk) == MemoryKind::kCuda;
        const bool dst_dev = (op == Op::kWrite ? rk : lk) == MemoryKind::kCuda;
        EXPECT_EQ(staging_.counters.to_host - host0, src_dev ? kBytes : 0);
        EXPECT_EQ(staging_.counters.to_device - dev0, dst_dev ? kBytes : 0);
        // Each window was started once queued, not only when waited for.
        EXPECT_EQ(staging_.counters.unflushed_waits, 0u);
        ASSERT_TRUE(a().Release(&*h).ok());
      }
    }
  }
}

// A post of a prepared handle again and again, with new bytes each time.
TEST_F(StagedTcp, RepostedHandleCarriesNewPayload) {
  constexpr uint64_t kBytes = 3 << 20;  // more than one chunk: striped over the lanes
  uint8_t* local = Region(a(), kBytes, MemoryKind::kCuda, 0);
  uint8_t* remote = Region(b(), kBytes, MemoryKind::kCuda, 0);
  Connect(a(), b());
  auto h = Scattered(Op::kWrite, local, MemoryKind::kCuda, remote, MemoryKind::kCuda, 1, kBytes);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  for (uint64_t epoch = 1; epoch <= 4; ++epoch) {
    Fill(local, kBytes, 100 + epoch);
    ASSERT_TRUE(PostAndWait(a(), &*h).ok());
    ASSERT_EQ(FirstMismatch(remote, kBytes, 100 + epoch), -1) << "epoch " << epoch;
  }
}

// A staging copy that fails: where, on which side, and how.
struct Fault {
  const char* name;
  Op op;
  MemoryKind local, remote;
  int copies_after;  // FakeCounters::fail_copies_after
  int waits_after;   // FakeCounters::fail_waits_after
  bool make;         // FakeCounters::fail_make
};

// Every fault fails that post only, with the copy's error, leaves no copy
// running once the post is published, and the lane goes on: the next post of
// the handle moves the bytes. One descriptor of 64 KiB is 16 windows of one
// copy each, so copies_after 0 fails the first window, 1 the second (queued
// before anything is sent), and 5 a window after the header went out.
TEST_F(StagedTcp, CopyFaultsFailThePostOnly) {
  constexpr uint64_t kBytes = 64 << 10;
  const MemoryKind kDev = MemoryKind::kCuda, kHost = MemoryKind::kHost;
  const Fault faults[] = {
      {"initiator write, first window", Op::kWrite, kDev, kHost, 0, -1, false},
      {"initiator write, second window before sending", Op::kWrite, kDev, kHost, 1, -1, false},
      {"initiator write, mid-stream queue", Op::kWrite, kDev, kHost, 5, -1, false},
      {"initiator write, mid-stream wait", Op::kWrite, kDev, kHost, -1, 3, false},
      {"initiator write, no copier", Op::kWrite, kDev, kHost, -1, -1, true},
      {"target write, queue", Op::kWrite, kHost, kDev, 3, -1, false},
      {"target write, wait", Op::kWrite, kHost, kDev, -1, 2, false},
      {"target write, no copier", Op::kWrite, kHost, kDev, -1, -1, true},
      {"target read, first window", Op::kRead, kHost, kDev, 0, -1, false},
      {"target read, mid-stream queue", Op::kRead, kHost, kDev, 5, -1, false},
      {"target read, mid-stream wait", Op::kRead, kHost, kDev, -1, 4, false},
      {"initiator read, queue", Op::kRead, kDev, kHost, 3, -1, false},
      {"initiator read, no copier", Op::kRead, kDev, kHost, -1, -1, true},
  };
  uint64_t seed = 20;
  for (const Fault& f : faults) {
    SCOPED_TRACE(f.name);
    ASSERT_NO_FATAL_FAILURE(pair_ = MakePair("tcp"));  // fresh copiers: "no copier" can bite
    uint8_t* local = Region(a(), kBytes, f.local, 0);
    uint8_t* remote = Region(b(), kBytes, f.remote, 0);
    Connect(a(), b());
    uint8_t* src = f.op == Op::kWrite ? local : remote;
    uint8_t* dst = f.op == Op::kWrite ? remote : local;
    auto h = Scattered(f.op, local, f.local, remote, f.remote, 1, kBytes);
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    Fill(src, kBytes, ++seed);
    staging_.counters.fail_copies_after = f.copies_after;
    staging_.counters.fail_waits_after = f.waits_after;
    staging_.counters.fail_make = f.make;
    Status s = PostAndWait(a(), &*h);
    EXPECT_EQ(s.code(), Code::kBackend) << s.ToString();
    EXPECT_EQ(staging_.counters.pending.load(), 0) << "copies still queued after the post ended";
    staging_.counters.fail_copies_after = -1;
    staging_.counters.fail_waits_after = -1;
    staging_.counters.fail_make = false;
    EXPECT_TRUE(a().PeerError("b").ok())
        << "the channel latched: " << a().PeerError("b").ToString();
    Fill(src, kBytes, ++seed);
    ASSERT_TRUE(PostAndWait(a(), &*h).ok());
    EXPECT_EQ(FirstMismatch(dst, kBytes, seed), -1);
  }
}

// A target without staging (no GPU there) refuses device frames with
// kNotSupported; the lane goes on.
TEST_F(StagedTcp, TargetWithoutStagingRefusesDeviceFrames) {
  constexpr uint64_t kBytes = 8 << 10;
  uint8_t* local = Region(a(), kBytes, MemoryKind::kHost, 0);
  uint8_t* remote = Region(b(), kBytes, MemoryKind::kCuda, 0);
  Connect(a(), b());
  auto d = Scattered(Op::kWrite, local, MemoryKind::kHost, remote, MemoryKind::kCuda, 1, kBytes);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  core::SetDeviceStagingForTest(nullptr);  // the host-to-device post needs none on this side
  Status s = PostAndWait(a(), &*d);
  EXPECT_EQ(s.code(), Code::kNotSupported) << s.ToString();
  core::SetDeviceStagingForTest(&staging_);
  Fill(local, kBytes, 5);
  ASSERT_TRUE(PostAndWait(a(), &*d).ok());
  EXPECT_EQ(FirstMismatch(remote, kBytes, 5), -1);
}

// Without staging in this process, device memory cannot go over tcp: a clear
// error at registration (tcp is the only transport) instead of a wrong copy.
TEST(StagedTcpOff, DeviceMemoryNeedsStaging) {
  core::SetDeviceStagingForTest(nullptr);
  auto agent = Agent::Create(OptionsFor("solo", "tcp"));
  ASSERT_TRUE(agent.ok());
  std::vector<uint8_t> buf(4096);
  auto r = (*agent)->RegisterMemory(buf.data(), buf.size(), MemoryKind::kCuda);
  EXPECT_EQ(r.status().code(), Code::kNotSupported);
}

// shm cannot reach device memory: a transfer of it finds no transport (and
// with tcp enabled too, goes over tcp).
TEST(StagedTcpOff, ShmDoesNotMoveDeviceMemory) {
  FakeStaging staging;
  core::SetDeviceStagingForTest(&staging);
  Buffers bufs;  // outlives the agents
  for (bool with_tcp : {false, true}) {
    SCOPED_TRACE(with_tcp ? "shm, tcp" : "shm");
    auto make = [&](const char* name) {
      AgentOptions o = OptionsFor(name, "shm");
      o.transports.push_back("cuda");  // lets kCuda be registered without tcp
      if (with_tcp) o.transports.push_back("tcp");
      return Agent::Create(o);
    };
    auto a = make("a"), b = make("b");
    ASSERT_TRUE(a.ok() && b.ok());
    auto& remote = bufs.Make(4096);
    ASSERT_TRUE((*b)->RegisterMemory(remote.data(), remote.size(), MemoryKind::kCuda).ok());
    Connect(**a, **b);
    auto transport = (*a)->PeerTransport("b", MemoryKind::kCuda);
    if (with_tcp) {
      ASSERT_TRUE(transport.ok()) << transport.status().ToString();
      EXPECT_EQ(*transport, "tcp");
    } else {
      EXPECT_FALSE(transport.ok());
    }
  }
  core::SetDeviceStagingForTest(nullptr);
}

// A target counts its staging buffers by the name of the peer each connection
// serves: one initiator's lanes stop at the per-peer cap (kNotAllowed, its
// message naming the caps), another name still gets one, and the places come
// back once the first initiator's connections close.
TEST(StagedTcpQuota, ATargetCountsItsBuffersByThePeersName) {
  FakeStaging staging;
  core::SetDeviceStagingForTest(&staging);
  core::StagingQuota quota(/*process_cap=*/8, /*peer_cap=*/2);
  core::SetStagingQuotaForTest(&quota);
  Buffers bufs;  // outlives the agents
  {
    auto target = Agent::Create(OptionsFor("target", "tcp"));
    AgentOptions go = OptionsFor("greedy", "tcp");
    go.lanes_per_peer = 3;
    auto greedy = Agent::Create(go);
    auto other = Agent::Create(OptionsFor("other", "tcp"));
    ASSERT_TRUE(target.ok() && greedy.ok() && other.ok());
    constexpr uint64_t kBytes = 4096;
    auto& device = bufs.Make(4 * kBytes);
    ASSERT_TRUE((*target)->RegisterMemory(device.data(), device.size(), MemoryKind::kCuda).ok());
    auto& host = bufs.Make(kBytes, 0x5a);
    for (Agent* a : {greedy->get(), other->get()}) {
      ASSERT_TRUE(a->RegisterMemory(host.data(), host.size(), MemoryKind::kHost).ok());
      Connect(*a, **target);
    }
    // A WRITE of host memory into the target's device memory, on `lane`.
    auto write = [&](Agent& a, int lane) -> Status {
      DescList l{MemoryKind::kHost, {}}, r{MemoryKind::kCuda, {}};
      l.Add(host.data(), kBytes);
      r.Add(device.data() + lane * kBytes, kBytes);
      KVLANE_ASSIGN_OR_RETURN(PreparedId lp, a.PrepareLocal(l));
      KVLANE_ASSIGN_OR_RETURN(PreparedId rp, a.PrepareRemote("target", r));
      KVLANE_ASSIGN_OR_RETURN(
          XferHandle h, a.MakeTransfer(Op::kWrite, lp, {}, rp, {}, {}, XferOptions{lane, false}));
      Status s = PostAndWait(a, &h);
      (void)a.Release(&h);
      return s;
    };
    EXPECT_TRUE(write(**greedy, 0).ok());
    EXPECT_TRUE(write(**greedy, 1).ok());
    const Status refused = write(**greedy, 2);  // a third connection of the name
    EXPECT_EQ(refused.code(), Code::kNotAllowed) << refused.ToString();
    EXPECT_NE(refused.message().find("staging buffer"), std::string::npos) << refused.ToString();
    EXPECT_EQ(quota.alive("greedy"), 2);
    EXPECT_TRUE(write(**other, 0).ok());  // another name is not held up
    EXPECT_EQ(quota.alive("other"), 1);
    EXPECT_EQ(FirstNot(device.data(), 2 * kBytes, 0x5a), -1);        // the accepted WRITEs landed
    EXPECT_EQ(FirstNot(device.data() + 2 * kBytes, kBytes, 0), -1);  // the refused one did not
    greedy->reset();  // its connections close, and the target's copiers for them go
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (quota.alive("greedy") > 0 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    EXPECT_EQ(quota.alive("greedy"), 0);
    EXPECT_EQ(quota.alive(), 1);  // other's, still connected
  }
  core::SetStagingQuotaForTest(nullptr);
  core::SetDeviceStagingForTest(nullptr);
}

}  // namespace
}  // namespace kvlane::test
