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
  void SetUp() override {
    pair_ = MakePair(GetParam());
    ASSERT_TRUE(pair_.a && pair_.b);
    auto md = pair_.b->ExportMetadata();
    ASSERT_TRUE(md.ok());
    auto name = pair_.a->LoadPeer(md.value());
    ASSERT_TRUE(name.ok()) << name.status().ToString();
    ASSERT_EQ(name.value(), "b");
  }
  Pair pair_;
};

// 513 descriptors of varying length, WRITE then READ, checked byte by byte.
TEST_P(TransferTest, Moves513DescriptorsBothWays) {
  Agent& a = *pair_.a;
  Agent& b = *pair_.b;
  constexpr int kDescs = 513;
  std::vector<uint64_t> lens(kDescs);
  for (int i = 0; i < kDescs; ++i) lens[i] = 64 + (i * 37) % 4000;
  uint64_t total = std::accumulate(lens.begin(), lens.end(), uint64_t{0});
  std::vector<uint8_t> src(total), dst(total, 0xEE), back(total, 0xCC);
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

INSTANTIATE_TEST_SUITE_P(Transports, TransferTest, ::testing::Values("local", "shm", "tcp"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace kvlane::test
