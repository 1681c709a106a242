// Read-only registrations (Access::kReadOnly) over every host transport: peers
// READ them as usual; a WRITE into one is refused with kNotAllowed by the
// initiator at MakeTransfer and, when an initiator ignores the flag (its copy of
// the metadata rewritten), by the target itself; no byte of the region changes.
#include <gtest/gtest.h>

#include "core/metadata.h"
#include "test_util.h"
#include "two_agents.h"

namespace kvlane::test {
namespace {

constexpr uint64_t kSize = 64 << 10;
constexpr uint64_t kPiece = 16 << 10;  // regions span several pieces

class ReadOnlyTest : public TwoAgents {
 protected:
  void SetUp() override {
    AgentOptions o;
    o.piece_bytes = kPiece;
    ASSERT_NO_FATAL_FAILURE(MakeAgents(o, /*connect=*/false));
    Fill(mine_, 1);
    Fill(ro_, 2);
    Fill(rw_, 3);
    ASSERT_TRUE(a().RegisterMemory(mine_.data(), kSize).ok());
    auto ro = b().RegisterMemory(ro_.data(), kSize, MemoryKind::kHost, 0, Access::kReadOnly);
    ASSERT_TRUE(ro.ok()) << ro.status().ToString();
    ASSERT_TRUE(b().RegisterMemory(rw_.data(), kSize).ok());  // read-write by default
    Connect(a(), b());
  }

  // A transfer of `n` bytes between mine_ and each remote address in turn.
  Result<XferHandle> Make(Op op, std::initializer_list<const uint8_t*> remote, uint64_t n) {
    DescList l, r;
    uint64_t off = 0;
    for (const uint8_t* p : remote) {
      l.Add(mine_.data() + off, n);
      r.Add(p, n);
      off += n;
    }
    KVLANE_ASSIGN_OR_RETURN(PreparedId lp, a().PrepareLocal(l));
    KVLANE_ASSIGN_OR_RETURN(PreparedId rp, a().PrepareRemote("b", r));
    return a().MakeTransfer(op, lp, {}, rp, {});
  }
  bool RoIntact() { return FirstMismatch(ro_.data(), kSize, 2) < 0; }

  std::vector<uint8_t> mine_ = std::vector<uint8_t>(kSize);
  std::vector<uint8_t> ro_ = std::vector<uint8_t>(kSize);
  std::vector<uint8_t> rw_ = std::vector<uint8_t>(kSize);
};

TEST_P(ReadOnlyTest, ReadOfReadOnlyRegionReturnsItsBytes) {
  auto h = Make(Op::kRead, {ro_.data()}, kSize);  // all four pieces
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  ASSERT_TRUE(PostAndWait(a(), &h.value()).ok());
  EXPECT_EQ(FirstMismatch(mine_.data(), kSize, 2), -1);
  EXPECT_TRUE(a().Release(&h.value()).ok());
}

TEST_P(ReadOnlyTest, WriteIntoReadOnlyRegionIsNotAllowed) {
  for (uint64_t at : {uint64_t{0}, kPiece - 8, kSize - 64}) {  // inside, across pieces, at the end
    SCOPED_TRACE(at);
    auto h = Make(Op::kWrite, {ro_.data() + at}, 64);
    ASSERT_FALSE(h.ok());
    EXPECT_EQ(h.status().code(), Code::kNotAllowed);
    EXPECT_NE(h.status().message().find("read-only"), std::string::npos) << h.status().ToString();
  }
  EXPECT_TRUE(RoIntact());
  EXPECT_TRUE(b().TakeNotifications().empty());
}

TEST_P(ReadOnlyTest, ReadWriteRegionIsUnaffected) {
  auto w = Make(Op::kWrite, {rw_.data()}, kSize);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  ASSERT_TRUE(PostAndWait(a(), &w.value()).ok());
  EXPECT_EQ(FirstMismatch(rw_.data(), kSize, 1), -1);
  Fill(mine_, 9);
  auto r = Make(Op::kRead, {rw_.data()}, kSize);
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(PostAndWait(a(), &r.value()).ok());
  EXPECT_EQ(FirstMismatch(mine_.data(), kSize, 1), -1);
  EXPECT_TRUE(RoIntact());
}

TEST_P(ReadOnlyTest, MixedRemoteListIsRefusedAsAWhole) {
  const uint64_t n = 4096;
  auto w = Make(Op::kWrite, {rw_.data(), ro_.data() + n, rw_.data() + 2 * n}, n);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), Code::kNotAllowed);
  EXPECT_NE(w.status().message().find("remote descriptor 1"), std::string::npos)
      << w.status().ToString();
  EXPECT_EQ(FirstMismatch(rw_.data(), kSize, 3), -1) << "a refused WRITE moved bytes";
  EXPECT_TRUE(RoIntact());
  // The same list read back works.
  auto r = Make(Op::kRead, {rw_.data(), ro_.data() + n, rw_.data() + 2 * n}, n);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(PostAndWait(a(), &r.value()).ok());
  EXPECT_EQ(FirstMismatch(mine_.data(), n, 3), -1);
  EXPECT_EQ(FirstMismatch(mine_.data() + n, n, 2, n), -1);
  EXPECT_EQ(FirstMismatch(mine_.data() + 2 * n, n, 3, 2 * n), -1);
}

// Only the pairs a transfer selects count: a prepared list may mix regions.
TEST_P(ReadOnlyTest, OnlySelectedRemoteDescriptorsAreChecked) {
  DescList l, r;
  l.Add(mine_.data(), 4096);
  r.Add(ro_.data(), 4096);
  r.Add(rw_.data(), 4096);
  auto lp = a().PrepareLocal(l);
  auto rp = a().PrepareRemote("b", r);
  ASSERT_TRUE(lp.ok() && rp.ok());
  const uint32_t zero = 0, ro_idx = 0, rw_idx = 1;
  auto bad = a().MakeTransfer(Op::kWrite, lp.value(), {&zero, 1}, rp.value(), {&ro_idx, 1});
  EXPECT_EQ(bad.status().code(), Code::kNotAllowed);
  auto good = a().MakeTransfer(Op::kWrite, lp.value(), {&zero, 1}, rp.value(), {&rw_idx, 1});
  ASSERT_TRUE(good.ok()) << good.status().ToString();
  ASSERT_TRUE(PostAndWait(a(), &good.value()).ok());
  EXPECT_EQ(FirstMismatch(rw_.data(), 4096, 1), -1);
  EXPECT_TRUE(RoIntact());
}

// An initiator whose copy of the metadata says read-write (rewritten, or a
// peer that ignores the flag) gets past MakeTransfer: the target refuses.
TEST_P(ReadOnlyTest, TargetRefusesWriteWhenInitiatorIgnoresTheFlag) {
  auto meta = core::DecodeMeta(b().ExportMetadata().value());
  ASSERT_TRUE(meta.ok());
  int read_only = 0;
  for (core::Piece& p : meta->pieces) {
    read_only += p.access == Access::kReadOnly;
    p.access = Access::kReadWrite;
  }
  ASSERT_EQ(read_only, static_cast<int>(kSize / kPiece));
  ASSERT_TRUE(a().LoadPeer(core::EncodeMeta(meta.value())).ok());
  auto w = Make(Op::kWrite, {ro_.data() + kPiece - 8}, 64);  // two pieces
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ(PostAndWait(a(), &w.value()).code(), Code::kNotAllowed);
  EXPECT_TRUE(RoIntact());
  // The connection keeps serving: a READ of it and a WRITE elsewhere work.
  auto r = Make(Op::kRead, {ro_.data()}, kSize);
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(PostAndWait(a(), &r.value()).ok());
  EXPECT_EQ(FirstMismatch(mine_.data(), kSize, 2), -1);
  auto ok = Make(Op::kWrite, {rw_.data()}, 4096);
  ASSERT_TRUE(ok.ok());
  EXPECT_TRUE(PostAndWait(a(), &ok.value()).ok());
  EXPECT_EQ(FirstMismatch(rw_.data(), 4096, 2), -1);
}

TEST_P(ReadOnlyTest, MetadataCarriesTheAccessOfEachPiece) {
  auto meta = core::DecodeMeta(b().ExportMetadata().value());
  ASSERT_TRUE(meta.ok()) << meta.status().ToString();
  ASSERT_EQ(meta->pieces.size(), 2 * kSize / kPiece);
  for (const core::Piece& p : meta->pieces) {
    const bool in_ro = p.base >= reinterpret_cast<uint64_t>(ro_.data()) &&
                       p.base < reinterpret_cast<uint64_t>(ro_.data()) + kSize;
    EXPECT_EQ(p.access, in_ro ? Access::kReadOnly : Access::kReadWrite);
  }
}

TEST_P(ReadOnlyTest, RegisterRejectsAnUnknownAccess) {
  std::vector<uint8_t> buf(4096);
  auto r = b().RegisterMemory(buf.data(), buf.size(), MemoryKind::kHost, 0, static_cast<Access>(7));
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(Transports, ReadOnlyTest, ::testing::Values("local", "shm", "tcp"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace kvlane::test
