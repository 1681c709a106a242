// Soak: 100,000 requests with handle churn (prepare, make, post, wait, release)
// over several lanes. Resident memory and open descriptors stay flat after
// warm-up, and no request slot leaks (max_requests is small, so a leak would
// make MakeTransfer fail). KVLANE_SOAK_REQUESTS overrides the count (CI under
// ThreadSanitizer runs fewer; see scripts/ci-hardening.sh).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "test_util.h"

namespace kvlane::test {
namespace {

using namespace std::chrono_literals;

size_t OpenFds() {
  size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) (void)e, ++n;
  return n;
}

class SoakTest : public ::testing::TestWithParam<std::string> {};

TEST_P(SoakTest, HandleChurnKeepsMemoryAndSlotsFlat) {
  const char* env = std::getenv("KVLANE_SOAK_REQUESTS");
  const int total = env != nullptr ? std::atoi(env) : 100000;
  constexpr int kBatch = 8, kSlots = 32;
  constexpr uint64_t kSlice = 4096;
  AgentOptions o;
  o.lanes_per_peer = 4;
  o.max_requests = kSlots;
  o.lane_ring_slots = 256;
  // The buffers outlive the agents (declared first, destroyed last): a target's
  // server thread may still be returning from the sendmsg of the last READ's
  // reply when the initiator has seen it finish.
  std::vector<uint8_t> src(kBatch * kSlice), dst(kBatch * kSlice), back(kBatch * kSlice);
  Pair p = MakePair(GetParam(), o);
  Agent& a = *p.a;
  Agent& b = *p.b;
  Fill(src, 3);
  ASSERT_TRUE(a.RegisterMemory(src.data(), src.size()).ok());
  ASSERT_TRUE(a.RegisterMemory(back.data(), back.size()).ok());
  ASSERT_TRUE(b.RegisterMemory(dst.data(), dst.size()).ok());
  ASSERT_TRUE(a.LoadPeer(b.ExportMetadata().value()).ok());

  uint64_t rss_warm = 0;
  size_t fds_warm = 0;
  int posted = 0;
  const int warmup = std::max(total / 10, kBatch);
  while (posted < total) {
    XferHandle h[kBatch];
    PreparedId pl[kBatch], pr[kBatch];
    const bool write = (posted / kBatch) % 2 == 0;
    for (int k = 0; k < kBatch; ++k) {
      DescList l, r;
      l.Add((write ? src.data() : back.data()) + k * kSlice, kSlice);
      r.Add(dst.data() + k * kSlice, kSlice);
      auto plk = a.PrepareLocal(l);
      auto prk = a.PrepareRemote("b", r);
      ASSERT_TRUE(plk.ok() && prk.ok());
      pl[k] = plk.value(), pr[k] = prk.value();
      XferOptions xo;
      xo.lane = k % 2 ? -1 : k / 2 % o.lanes_per_peer;  // fixed lanes and engine-picked ones
      auto x = a.MakeTransfer(write ? Op::kWrite : Op::kRead, pl[k], {}, pr[k], {}, {}, xo);
      ASSERT_TRUE(x.ok()) << "after " << posted << " requests: " << x.status().ToString();
      h[k] = x.value();
      ASSERT_FALSE(a.Post(&h[k]).is_error());
    }
    for (int k = 0; k < kBatch; ++k) {
      Status s = a.Wait(h[k], 30s);
      ASSERT_TRUE(s.ok()) << "request " << posted + k << ": " << s.ToString();
      ASSERT_TRUE(a.Release(&h[k]).ok());
      ASSERT_TRUE(a.ReleasePrepared(pl[k]).ok());
      ASSERT_TRUE(a.ReleasePrepared(pr[k]).ok());
    }
    posted += kBatch;
    if (!write && posted % 4096 < kBatch)  // spot check: the READ brought the WRITE's bytes back
      ASSERT_EQ(FirstMismatch(back.data(), back.size(), 3), -1) << "after " << posted;
    if (rss_warm == 0 && posted >= warmup) rss_warm = RssBytes(), fds_warm = OpenFds();
  }
  EXPECT_EQ(FirstMismatch(back.data(), back.size(), 3), -1);
  const uint64_t rss_end = RssBytes();
  const size_t fds_end = OpenFds();
  std::printf("[ info ] %s: %d requests; rss after warm-up %llu KiB, at end %llu KiB; fds %zu -> %zu\n",
              GetParam().c_str(), posted, static_cast<unsigned long long>(rss_warm / 1024),
              static_cast<unsigned long long>(rss_end / 1024), fds_warm, fds_end);
  EXPECT_EQ(fds_end, fds_warm) << "descriptors leaked";
  if (!kSanitized) EXPECT_LT(rss_end, rss_warm + (8ull << 20)) << "resident memory grew after warm-up";

  // Every slot is free again: max_requests transfers can be made at once.
  DescList l, r;
  l.Add(src.data(), kSlice);
  r.Add(dst.data(), kSlice);
  auto pl = a.PrepareLocal(l);
  auto pr = a.PrepareRemote("b", r);
  ASSERT_TRUE(pl.ok() && pr.ok());
  std::vector<XferHandle> all;
  for (int i = 0; i < kSlots; ++i) {
    auto x = a.MakeTransfer(Op::kWrite, pl.value(), {}, pr.value(), {});
    ASSERT_TRUE(x.ok()) << "slot " << i << " leaked: " << x.status().ToString();
    all.push_back(x.value());
  }
  EXPECT_FALSE(a.MakeTransfer(Op::kWrite, pl.value(), {}, pr.value(), {}).ok());
  for (XferHandle& x : all) EXPECT_TRUE(a.Release(&x).ok());
}

INSTANTIATE_TEST_SUITE_P(Transports, SoakTest, ::testing::Values("local", "tcp"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace kvlane::test
