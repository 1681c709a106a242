// Core transfer behaviour on every host transport (local, shm, tcp), with both
// agents in this process. Two-process variants live in multiprocess_test.cc.
#include <gtest/gtest.h>

#include <chrono>
#include <numeric>

#include "test_util.h"

namespace kvlane::test {
namespace {

using namespace std::chrono_literals;

class TransferTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { Make({}); }
  void Make(AgentOptions base) {
    pair_ = MakePair(GetParam(), base);
    ASSERT_TRUE(pair_.a && pair_.b);
    auto md = pair_.b->ExportMetadata();
    ASSERT_TRUE(md.ok());
    auto name = pair_.a->LoadPeer(md.value());
    ASSERT_TRUE(name.ok()) << name.status().ToString();
    ASSERT_EQ(name.value(), "b");
  }
  Buffers bufs_;  // before pair_: outlives the agents
  Pair pair_;
};

// 513 descriptors of varying length, WRITE then READ, checked byte by byte.
// They are adjacent on both sides: merging is off so that 513 segments move.
TEST_P(TransferTest, Moves513DescriptorsBothWays) {
  AgentOptions o;
  o.merge_adjacent = false;
  Make(o);
  Agent& a = *pair_.a;
  Agent& b = *pair_.b;
  constexpr int kDescs = 513;
  std::vector<uint64_t> lens(kDescs);
  for (int i = 0; i < kDescs; ++i) lens[i] = 64 + (i * 37) % 4000;
  uint64_t total = std::accumulate(lens.begin(), lens.end(), uint64_t{0});
  auto& src = bufs_.Make(total);
  auto& dst = bufs_.Make(total, 0xEE);
  auto& back = bufs_.Make(total, 0xCC);
  Fill(src, 7);
  ASSERT_TRUE(a.RegisterMemory(src.data(), total).ok());
  ASSERT_TRUE(a.RegisterMemory(back.data(), total).ok());
  ASSERT_TRUE(b.RegisterMemory(dst.data(), total).ok());
  ASSERT_TRUE(a.LoadPeer(b.ExportMetadata().value()).ok());

  DescList ls, lb, rd;
  uint64_t off = 0;
  for (int i = 0; i < kDescs; ++i) {
    ls.Add(src.data() + off, lens[i]);
    lb.Add(back.data() + off, lens[i]);
    rd.Add(dst.data() + off, lens[i]);
    off += lens[i];
  }
  auto pls = a.PrepareLocal(ls), plb = a.PrepareLocal(lb);
  auto prd = a.PrepareRemote("b", rd);
  ASSERT_TRUE(pls.ok() && plb.ok() && prd.ok()) << prd.status().ToString();
  auto w = a.MakeTransfer(Op::kWrite, pls.value(), {}, prd.value(), {});
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  XferHandle wh = w.value();
  auto plan = a.Describe(wh);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->segments, static_cast<uint32_t>(kDescs));
  ASSERT_FALSE(a.Post(&wh).is_error());
  Status s = a.Wait(wh, 10s);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(FirstMismatch(dst.data(), total, 7), -1);

  auto r = a.MakeTransfer(Op::kRead, plb.value(), {}, prd.value(), {});
  ASSERT_TRUE(r.ok());
  XferHandle rh = r.value();
  ASSERT_FALSE(a.Post(&rh).is_error());
  ASSERT_TRUE(a.Wait(rh, 10s).ok());
  EXPECT_EQ(FirstMismatch(back.data(), total, 7), -1);
  EXPECT_TRUE(a.Release(&wh).ok());
  EXPECT_TRUE(a.Release(&rh).ok());
  EXPECT_EQ(a.PeerTransport("b").value(), GetParam());
}

// Regions cut into 4 KiB pieces; 513 descriptors at offsets that differ on the
// two sides, so local and remote piece boundaries cut each pair at different
// places. The gaps between remote descriptors must stay untouched.
TEST_P(TransferTest, Moves513DescriptorsAcrossPieceBoundaries) {
  AgentOptions o;
  o.piece_bytes = 4096;
  o.chunk_bytes = 16384;
  o.max_segments_per_chunk = 64;
  Make(o);
  Agent& a = *pair_.a;
  Agent& b = *pair_.b;
  constexpr int kDescs = 513;
  constexpr uint64_t kGap = 17, kSize = 4u << 20;
  auto& src = bufs_.Make(kSize);
  auto& back = bufs_.Make(kSize, 0xCC);
  Guarded dst(kSize, 4096, 0xEE);
  Fill(src, 11);
  ASSERT_TRUE(a.RegisterMemory(src.data(), kSize).ok());
  ASSERT_TRUE(a.RegisterMemory(back.data(), kSize).ok());
  auto dst_region = b.RegisterMemory(dst.data(), kSize);
  ASSERT_TRUE(dst_region.ok());
  Connect(a, b);

  DescList ls, lb, rd;
  std::vector<std::pair<uint64_t, uint64_t>> remote_ranges;  // (offset, len)
  uint64_t loff = 1000, roff = 3001;
  for (int i = 0; i < kDescs; ++i) {
    uint64_t len = 1 + (i * 2659) % 6000;
    ls.Add(src.data() + loff, len);
    lb.Add(back.data() + loff, len);
    rd.Add(dst.data() + roff, len);
    remote_ranges.push_back({roff, len});
    loff += len;
    roff += len + kGap;
  }
  ASSERT_LT(roff, kSize);
  auto pls = a.PrepareLocal(ls), plb = a.PrepareLocal(lb);
  auto prd = a.PrepareRemote("b", rd);
  ASSERT_TRUE(pls.ok() && plb.ok() && prd.ok()) << prd.status().ToString();
  auto w = a.MakeTransfer(Op::kWrite, pls.value(), {}, prd.value(), {});
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  ASSERT_TRUE(PostAndWait(a, &w.value()).ok());

  loff = 1000;
  uint64_t prev_end = 0;
  for (auto [off, len] : remote_ranges) {
    ASSERT_EQ(FirstMismatch(dst.data() + off, len, 11, loff), -1) << "remote offset " << off;
    ASSERT_EQ(FirstNot(dst.data() + prev_end, off - prev_end, 0xEE), -1) << "gap before " << off;
    prev_end = off + len;
    loff += len;
  }
  EXPECT_EQ(FirstNot(dst.data() + prev_end, kSize - prev_end, 0xEE), -1);
  EXPECT_TRUE(dst.GuardsIntact());

  auto r = a.MakeTransfer(Op::kRead, plb.value(), {}, prd.value(), {});
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(PostAndWait(a, &r.value()).ok());
  EXPECT_EQ(FirstMismatch(back.data() + 1000, loff - 1000, 11, 1000), -1);
  EXPECT_EQ(FirstNot(back.data(), 1000, 0xCC), -1);
  EXPECT_EQ(FirstNot(back.data() + loff, kSize - loff, 0xCC), -1);
  // `dst` goes before the agents: deregistering waits until the target's last
  // access to it returned (its READ reply's sendmsg may still be returning when
  // the initiator already holds every byte; ASan saw it read the iovec then).
  EXPECT_TRUE(b.DeregisterMemory(dst_region.value()).ok());
}

// Index spans pick and pair descriptors: local i goes to remote 63 - i, and a
// subset of the lists moves only the chosen pairs.
TEST_P(TransferTest, IndexSpansPairChosenDescriptors) {
  Agent& a = *pair_.a;
  Agent& b = *pair_.b;
  constexpr uint32_t kN = 64, kLen = 1000;
  auto& src = bufs_.Make(kN * kLen);
  auto& dst = bufs_.Make(kN * kLen, 0xEE);
  Fill(src, 3);
  ASSERT_TRUE(a.RegisterMemory(src.data(), src.size()).ok());
  ASSERT_TRUE(b.RegisterMemory(dst.data(), dst.size()).ok());
  Connect(a, b);
  DescList l, r;
  for (uint32_t i = 0; i < kN; ++i) l.Add(src.data() + i * kLen, kLen), r.Add(dst.data() + i * kLen, kLen);
  auto lp = a.PrepareLocal(l);
  auto rp = a.PrepareRemote("b", r);
  ASSERT_TRUE(lp.ok() && rp.ok());
  std::vector<uint32_t> li, ri;
  for (uint32_t i = 0; i < kN; i += 2) li.push_back(i), ri.push_back(kN - 1 - i);
  auto h = a.MakeTransfer(Op::kWrite, lp.value(), li, rp.value(), ri);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  ASSERT_TRUE(PostAndWait(a, &h.value()).ok());
  for (uint32_t i = 0; i < kN; ++i) {
    const uint8_t* d = dst.data() + (kN - 1 - i) * kLen;
    if (i % 2 == 0) {
      EXPECT_EQ(FirstMismatch(d, kLen, 3, i * kLen), -1) << i;
    } else {
      EXPECT_EQ(FirstNot(d, kLen, 0xEE), -1) << i;
    }
  }
}

// One prepared handle posted 40 times: each epoch rewrites the source (WRITE)
// or the target (READ) with new bytes, and each post must move that epoch's
// bytes. Copies of the previous post's handle read as stale.
TEST_P(TransferTest, RepostsPreparedHandleWithChangingBytes) {
  AgentOptions o;
  o.chunk_bytes = 64 << 10;
  o.stripe_min_bytes = 128 << 10;  // 256 KiB requests stripe over both lanes
  Make(o);
  Agent& a = *pair_.a;
  Agent& b = *pair_.b;
  constexpr uint64_t kSize = 256 << 10;
  auto& src = bufs_.Make(kSize);
  auto& dst = bufs_.Make(kSize);
  auto& back = bufs_.Make(kSize);
  ASSERT_TRUE(a.RegisterMemory(src.data(), kSize).ok());
  ASSERT_TRUE(a.RegisterMemory(back.data(), kSize).ok());
  ASSERT_TRUE(b.RegisterMemory(dst.data(), kSize).ok());
  Connect(a, b);
  DescList ls, lb, rd;
  for (uint64_t off = 0; off < kSize; off += 8192) {
    ls.Add(src.data() + off, 8192);
    lb.Add(back.data() + off, 8192);
    rd.Add(dst.data() + off, 8192);
  }
  auto w = a.MakeTransfer(Op::kWrite, a.PrepareLocal(ls).value(), {},
                          a.PrepareRemote("b", rd).value(), {});
  auto r = a.MakeTransfer(Op::kRead, a.PrepareLocal(lb).value(), {},
                          a.PrepareRemote("b", rd).value(), {});
  ASSERT_TRUE(w.ok() && r.ok());
  XferHandle wh = w.value(), rh = r.value();
  for (uint64_t epoch = 1; epoch <= 40; ++epoch) {
    XferHandle before = wh;
    Fill(src, epoch * 2);
    ASSERT_TRUE(PostAndWait(a, &wh).ok()) << epoch;
    ASSERT_NE(wh.gen, before.gen);
    ASSERT_EQ(a.Check(before).code(), Code::kNotFound) << "previous post read as current";
    ASSERT_EQ(FirstMismatch(dst.data(), kSize, epoch * 2), -1) << "WRITE epoch " << epoch;

    Fill(dst, epoch * 2 + 1);  // the target changes its bytes between READs
    ASSERT_TRUE(PostAndWait(a, &rh).ok()) << epoch;
    ASSERT_EQ(FirstMismatch(back.data(), kSize, epoch * 2 + 1), -1) << "READ epoch " << epoch;
    ASSERT_TRUE(a.Check(rh).ok());
    ASSERT_TRUE(a.Check(wh).ok());
  }
  EXPECT_TRUE(a.Release(&wh).ok());
  EXPECT_TRUE(a.Release(&rh).ok());
}

INSTANTIATE_TEST_SUITE_P(Transports, TransferTest, ::testing::Values("local", "shm", "tcp"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace kvlane::test
