// Bad input: descriptors outside regions, zero lengths, mismatched lists,
// unknown peers, malformed metadata. Each gets a clear status; nothing moves.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>

#include "core/host_mapping.h"
#include "core/metadata.h"
#include "test_util.h"
#include "two_agents.h"

namespace kvlane::test {
namespace {

using namespace std::chrono_literals;

constexpr uint64_t kSize = 64 << 10;

class BadInputTest : public TwoAgents {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(MakeAgents({}, /*connect=*/false));
    src_.resize(kSize);
    Fill(src_, 6);
    ASSERT_TRUE(a().RegisterMemory(src_.data(), kSize).ok());
    ASSERT_TRUE(b().RegisterMemory(dst_.data(), kSize).ok());
    Connect(a(), b());
  }
  void TearDown() override {
    TwoAgents::TearDown();  // no engine thread left that could write
    EXPECT_TRUE(dst_.GuardsIntact()) << "bytes written outside the region";
  }
  Code PrepareLocalCode(const void* p, uint64_t n) {
    DescList l;
    l.Add(p, n);
    return a().PrepareLocal(l).status().code();
  }
  Code PrepareRemoteCode(const void* p, uint64_t n, const std::string& peer = "b") {
    DescList l;
    l.Add(p, n);
    return a().PrepareRemote(peer, l).status().code();
  }
  bool DstUntouched() { return FirstNot(dst_.data(), kSize, 0xEE) < 0; }
  std::vector<uint8_t> src_;
  Guarded dst_{kSize, 4096, 0xEE};
};

TEST_P(BadInputTest, DescriptorsOutsideRegions) {
  const uint8_t* d = dst_.data();
  EXPECT_EQ(PrepareRemoteCode(d - 1, 16), Code::kInvalidArgument) << "starts before the region";
  EXPECT_EQ(PrepareRemoteCode(d + kSize - 8, 16), Code::kInvalidArgument) << "runs past the end";
  EXPECT_EQ(PrepareRemoteCode(d + kSize, 1), Code::kInvalidArgument) << "just past the end";
  EXPECT_EQ(PrepareRemoteCode(d, kSize + 1), Code::kInvalidArgument);
  EXPECT_EQ(PrepareRemoteCode(reinterpret_cast<void*>(~uint64_t{0} - 4), 16), Code::kInvalidArgument)
      << "wraps the address space";
  EXPECT_EQ(PrepareLocalCode(src_.data() + kSize - 1, 2), Code::kInvalidArgument);
  EXPECT_EQ(PrepareLocalCode(dst_.data(), 16), Code::kInvalidArgument) << "b's memory is not a's";
  int stack_byte = 0;
  EXPECT_EQ(PrepareLocalCode(&stack_byte, sizeof(stack_byte)), Code::kInvalidArgument);
  EXPECT_TRUE(DstUntouched());
}

TEST_P(BadInputTest, ZeroLengths) {
  EXPECT_EQ(PrepareLocalCode(src_.data(), 0), Code::kInvalidArgument);
  EXPECT_EQ(PrepareRemoteCode(dst_.data(), 0), Code::kInvalidArgument);
  EXPECT_EQ(a().RegisterMemory(src_.data(), 0).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(a().RegisterMemory(nullptr, 16).status().code(), Code::kInvalidArgument);
  // An empty list prepares, but a transfer of nothing is refused.
  auto el = a().PrepareLocal(DescList{});
  auto er = a().PrepareRemote("b", DescList{});
  ASSERT_TRUE(el.ok() && er.ok());
  EXPECT_EQ(a().MakeTransfer(Op::kWrite, el.value(), {}, er.value(), {}).status().code(),
            Code::kInvalidArgument);
  EXPECT_TRUE(DstUntouched());
}

TEST_P(BadInputTest, MismatchedLists) {
  DescList l2, r3, r_long;
  l2.Add(src_.data(), 100);
  l2.Add(src_.data() + 100, 100);
  r3.Add(dst_.data(), 100);
  r3.Add(dst_.data() + 100, 100);
  r3.Add(dst_.data() + 200, 100);
  r_long.Add(dst_.data(), 100);
  r_long.Add(dst_.data() + 100, 101);
  auto lp = a().PrepareLocal(l2);
  auto rp3 = a().PrepareRemote("b", r3);
  auto rpl = a().PrepareRemote("b", r_long);
  ASSERT_TRUE(lp.ok() && rp3.ok() && rpl.ok());
  auto code = [&](PreparedId l, std::vector<uint32_t> li, PreparedId r, std::vector<uint32_t> ri) {
    return a().MakeTransfer(Op::kWrite, l, li, r, ri).status().code();
  };
  EXPECT_EQ(code(lp.value(), {}, rp3.value(), {}), Code::kInvalidArgument) << "2 vs 3 descriptors";
  EXPECT_EQ(code(lp.value(), {}, rpl.value(), {}), Code::kInvalidArgument) << "100 vs 101 bytes";
  EXPECT_EQ(code(lp.value(), {0, 1}, rp3.value(), {0}), Code::kInvalidArgument) << "index spans";
  EXPECT_EQ(code(lp.value(), {0, 2}, rp3.value(), {0, 1}), Code::kInvalidArgument) << "index out of range";
  EXPECT_EQ(code(lp.value(), {0}, rp3.value(), {7}), Code::kInvalidArgument) << "remote index out of range";
  EXPECT_EQ(code(rp3.value(), {}, lp.value(), {}), Code::kInvalidArgument) << "lists swapped";
  EXPECT_EQ(code(PreparedId{9999}, {}, rp3.value(), {}), Code::kNotFound) << "unknown prepared id";
  EXPECT_EQ(a().MakeTransfer(static_cast<Op>(7), lp.value(), {}, rp3.value(), {}).status().code(),
            Code::kInvalidArgument)
      << "unknown op";
  // The valid pairing still works and writes exactly its 200 bytes.
  auto ok = a().MakeTransfer(Op::kWrite, lp.value(), {}, rp3.value(), std::vector<uint32_t>{0, 1});
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  ASSERT_TRUE(PostAndWait(a(), &ok.value()).ok());
  EXPECT_EQ(FirstMismatch(dst_.data(), 200, 6), -1);
  EXPECT_EQ(FirstNot(dst_.data() + 200, kSize - 200, 0xEE), -1);
}

// A fixed lane past the channel's lanes (lanes_per_peer, 2 here), or a negative one
// other than -1, is refused at MakeTransfer, naming the range; the last lane and -1
// (the engine picks) are taken.
TEST_P(BadInputTest, ALaneThatIsNotTheChannelsIsRefused) {
  ASSERT_EQ(a().options().lanes_per_peer, 2);
  for (int lane : {2, -2}) {
    auto bad =
        MakeSimple(a(), "b", Op::kWrite, src_.data(), dst_.data(), 64, {}, XferOptions{lane});
    EXPECT_EQ(bad.status().code(), Code::kInvalidArgument) << "lane " << lane;
    EXPECT_NE(bad.status().message().find("lane " + std::to_string(lane) +
                                          " is not a lane of the channel (0..1"),
              std::string::npos)
        << bad.status().ToString();
  }
  for (int lane : {1, -1}) {
    auto ok = MakeSimple(a(), "b", Op::kWrite, src_.data(), dst_.data(), 64, {}, XferOptions{lane});
    ASSERT_TRUE(ok.ok()) << "lane " << lane << ": " << ok.status().ToString();
    ASSERT_TRUE(PostAndWait(a(), &ok.value()).ok()) << "lane " << lane;
  }
  EXPECT_EQ(FirstMismatch(dst_.data(), 64, 6), -1);
  EXPECT_EQ(FirstNot(dst_.data() + 64, kSize - 64, 0xEE), -1);
}

TEST_P(BadInputTest, UnknownPeerAndBadHandles) {
  EXPECT_EQ(PrepareRemoteCode(dst_.data(), 16, "nobody"), Code::kNotFound);
  EXPECT_EQ(a().SendNotification("nobody", "x").code(), Code::kNotFound);
  EXPECT_EQ(a().PeerTransport("nobody").status().code(), Code::kNotFound);
  EXPECT_EQ(a().PeerError("nobody").code(), Code::kNotFound);
  EXPECT_EQ(a().RemovePeer("nobody").code(), Code::kNotFound);
  XferHandle bogus{12345678, 1};
  EXPECT_EQ(a().Post(&bogus).code(), Code::kInvalidArgument);
  EXPECT_EQ(a().Check(bogus).code(), Code::kInvalidArgument);
  EXPECT_EQ(a().Cancel(bogus).code(), Code::kInvalidArgument);
  EXPECT_EQ(a().Release(&bogus).code(), Code::kInvalidArgument);
  XferHandle never_made{0, 77};
  EXPECT_EQ(a().Check(never_made).code(), Code::kNotFound);
  EXPECT_EQ(a().Post(&never_made).code(), Code::kNotFound);
  EXPECT_EQ(a().ReleasePrepared(PreparedId{4242}).code(), Code::kNotFound);
  // A removed peer is unknown from then on.
  ASSERT_TRUE(a().RemovePeer("b").ok());
  EXPECT_EQ(PrepareRemoteCode(dst_.data(), 16), Code::kNotFound);
  EXPECT_TRUE(DstUntouched());
}

// Every way a blob can be malformed is an InvalidArgument from LoadPeer.
TEST_P(BadInputTest, MalformedMetadataIsRejected) {
  std::string blob = b().ExportMetadata().value();
  auto load = [&](std::string_view s) { return a().LoadPeer(s).status().code(); };
  for (size_t n = 0; n < blob.size(); ++n)
    ASSERT_EQ(load(std::string_view(blob).substr(0, n)), Code::kInvalidArgument) << "truncated to " << n;
  std::string bad_magic = blob;
  bad_magic[0] ^= 0x20;
  EXPECT_EQ(load(bad_magic), Code::kInvalidArgument);
  EXPECT_NE(a().LoadPeer(bad_magic).status().message().find("magic"), std::string::npos);
  std::string bad_version = blob;
  bad_version[4] ^= 0x02;
  EXPECT_EQ(load(bad_version), Code::kInvalidArgument);
  EXPECT_EQ(load(blob + "x"), Code::kInvalidArgument) << "trailing bytes";
  std::mt19937_64 rng(1234);
  for (int i = 0; i < 500; ++i) {
    std::string junk(rng() % 600, '\0');
    for (char& c : junk) c = static_cast<char>(rng());
    if (i % 2 == 0 && junk.size() >= 6) std::memcpy(junk.data(), blob.data(), 6);  // valid magic+version
    ASSERT_EQ(load(junk), Code::kInvalidArgument) << "random blob " << i;
  }
  EXPECT_TRUE(DstUntouched());
}

// Every single-bit flip of a real blob either fails to load with
// InvalidArgument or loads as some (possibly wrong) peer; nothing crashes.
TEST_P(BadInputTest, BitFlippedMetadataLoadsOrFailsCleanly) {
  std::string blob = b().ExportMetadata().value();
  auto c = Agent::Create(OptionsFor("c", GetParam()));
  ASSERT_TRUE(c.ok());
  int rejected = 0;
  for (size_t bit = 0; bit < blob.size() * 8; ++bit) {
    std::string f = blob;
    f[bit / 8] ^= static_cast<char>(1u << (bit % 8));
    auto r = c.value()->LoadPeer(f);
    if (!r.ok()) {
      ASSERT_EQ(r.status().code(), Code::kInvalidArgument) << "bit " << bit << ": " << r.status().ToString();
      ++rejected;
    }
  }
  EXPECT_GT(rejected, 0);
}

// Metadata forged to claim more memory than b registered: a's prepare trusts
// the blob, but b bounds-checks every access against its live table, so the
// WRITE fails and not one byte lands outside the registered range.
TEST_P(BadInputTest, ForgedLargerRegionIsBoundsCheckedByTarget) {
  auto meta = core::DecodeMeta(b().ExportMetadata().value());
  ASSERT_TRUE(meta.ok());
  ASSERT_EQ(meta->pieces.size(), 1u);
  meta->pieces[0].base -= 4096;
  meta->pieces[0].len += 2 * 4096;
  ASSERT_TRUE(a().LoadPeer(core::EncodeMeta(meta.value())).ok());
  auto& big = bufs_.Make(kSize + 2 * 4096);
  Fill(big, 5);
  ASSERT_TRUE(a().RegisterMemory(big.data(), big.size()).ok());
  auto h = MakeSimple(a(), "b", Op::kWrite, big.data(), dst_.data() - 4096, big.size());
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  Status s = PostAndWait(a(), &h.value());
  EXPECT_TRUE(s.is_error()) << s.ToString();
  auto r = MakeSimple(a(), "b", Op::kRead, big.data(), dst_.data() + kSize - 16, 4096);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(PostAndWait(a(), &r.value()).is_error()) << "READ past the end was served";
  // Forged key: the target does not know it.
  meta->pieces[0] = core::DecodeMeta(b().ExportMetadata().value())->pieces[0];
  meta->pieces[0].key ^= 1;
  ASSERT_TRUE(a().LoadPeer(core::EncodeMeta(meta.value())).ok());
  auto k = MakeSimple(a(), "b", Op::kWrite, big.data(), dst_.data(), 4096);
  ASSERT_TRUE(k.ok());
  EXPECT_TRUE(PostAndWait(a(), &k.value()).is_error());
  EXPECT_TRUE(DstUntouched());
}

// Two pieces under one key would make a key name two mappings: refused.
TEST_P(BadInputTest, MetadataWithADuplicatePieceKeyIsRejected) {
  auto meta = core::DecodeMeta(b().ExportMetadata().value());
  ASSERT_TRUE(meta.ok());
  ASSERT_EQ(meta->pieces.size(), 1u);
  core::Piece second = meta->pieces[0];
  second.base += second.len + 4096;  // sorted, not overlapping: only the key repeats
  meta->pieces.push_back(second);
  auto r = a().LoadPeer(core::EncodeMeta(meta.value()));
  ASSERT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find("share a key"), std::string::npos) << r.status().ToString();
  meta->pieces[1].key ^= 1;  // the same table with distinct keys loads
  EXPECT_TRUE(a().LoadPeer(core::EncodeMeta(meta.value())).ok());
}

// A transfer of more than kMaxTransferBytes is refused at MakeTransfer, also
// when an index list names one large descriptor many times (the byte count
// must not wrap into a small one), and nothing is posted. At the cap it is
// made: one local GiB read 1024 times, written to 1024 distinct remote GiBs.
TEST_P(BadInputTest, TransfersOverTheByteCapAreRefused) {
  constexpr uint64_t kBig = 1ull << 30;                // mapped, never touched
  constexpr uint64_t kFit = kMaxTransferBytes / kBig;  // 1024 x 1 GiB: exactly the cap
  constexpr uint64_t kSpan = (kFit + 1) * kBig;        // a's GiB, then b's TiB
  void* va = mmap(nullptr, kSpan, PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (va == MAP_FAILED) GTEST_SKIP() << "no 1 TiB of address space here: " << std::strerror(errno);
  struct Unmap {
    void* va;
    ~Unmap() { munmap(va, kSpan); }
  } unmap{va};
  auto* base = static_cast<uint8_t*>(va);
  ASSERT_TRUE(a().RegisterMemory(base, kBig).ok());
  ASSERT_TRUE(b().RegisterMemory(base + kBig, kFit * kBig).ok());
  Connect(a(), b());
  DescList l, r;
  l.Add(base, kBig);
  for (uint64_t i = 0; i < kFit; ++i) r.Add(base + (i + 1) * kBig, kBig);
  auto lp = a().PrepareLocal(l);
  auto rp = a().PrepareRemote("b", r);
  ASSERT_TRUE(lp.ok() && rp.ok());
  std::vector<uint32_t> li(kFit + 1, 0), ri(kFit + 1, 0);
  for (uint32_t i = 0; i < kFit; ++i) ri[i] = i;
  auto over = a().MakeTransfer(Op::kWrite, lp.value(), li, rp.value(), ri);
  EXPECT_EQ(over.status().code(), Code::kInvalidArgument) << over.status().ToString();
  EXPECT_NE(over.status().message().find("1 TiB"), std::string::npos) << over.status().ToString();
  li.pop_back();
  ri.pop_back();
  auto at_cap = a().MakeTransfer(Op::kWrite, lp.value(), li, rp.value(), ri);
  ASSERT_TRUE(at_cap.ok()) << at_cap.status().ToString();
  auto info = a().Describe(at_cap.value());
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info.value().bytes, kMaxTransferBytes);
  EXPECT_EQ(info.value().pairs, kFit);
  EXPECT_TRUE(a().Release(&at_cap.value()).ok());  // never posted: nothing touched the memory
  // The slot of the refused one was never taken: as many transfers as before.
  auto small = MakeSimple(a(), "b", Op::kWrite, src_.data(), dst_.data(), 64);
  ASSERT_TRUE(small.ok());
  ASSERT_TRUE(PostAndWait(a(), &small.value()).ok());
  EXPECT_EQ(FirstMismatch(dst_.data(), 64, 6), -1);
  TwoAgents::TearDown();  // the agents let go of the mapping before it is unmapped
}

// Two pairs that would write the same bytes are refused at MakeTransfer,
// naming where, whichever the side: a WRITE's remote descriptors (one named
// twice, or two that overlap) or a READ's local ones. Sources may repeat (one
// local range written to two places), and the transfer moves exactly that.
TEST_P(BadInputTest, DestinationsThatOverlapAreRefused) {
  DescList l, r;
  for (int i = 0; i < 4; ++i) {
    l.Add(src_.data() + 100 * i, 100);
    r.Add(dst_.data() + 100 * i, 100);
  }
  r.Add(dst_.data() + 350, 100);  // remote 4 overlaps remote 3
  auto lp = a().PrepareLocal(l);
  auto rp = a().PrepareRemote("b", r);
  ASSERT_TRUE(lp.ok() && rp.ok());
  auto make = [&](Op op, std::vector<uint32_t> li, std::vector<uint32_t> ri) {
    return a().MakeTransfer(op, lp.value(), li, rp.value(), ri);
  };
  auto twice = make(Op::kWrite, {0, 1, 2}, {2, 0, 2});
  EXPECT_EQ(twice.status().code(), Code::kInvalidArgument) << twice.status().ToString();
  EXPECT_NE(twice.status().message().find("remote destinations of the transfer overlap"),
            std::string::npos)
      << twice.status().ToString();
  EXPECT_EQ(make(Op::kWrite, {0, 1}, {3, 4}).status().code(), Code::kInvalidArgument)
      << "remote 3 and 4 share 50 bytes";
  auto read_twice = make(Op::kRead, {1, 1}, {0, 2});
  EXPECT_EQ(read_twice.status().code(), Code::kInvalidArgument) << read_twice.status().ToString();
  EXPECT_NE(read_twice.status().message().find("local destinations"), std::string::npos)
      << read_twice.status().ToString();
  auto fan_out = make(Op::kWrite, {3, 3, 0}, {2, 0, 1});  // descending destinations, disjoint
  ASSERT_TRUE(fan_out.ok()) << fan_out.status().ToString();
  ASSERT_TRUE(PostAndWait(a(), &fan_out.value()).ok());
  EXPECT_EQ(FirstMismatch(dst_.data(), 100, 6, 300), -1);        // local 3
  EXPECT_EQ(FirstMismatch(dst_.data() + 100, 100, 6, 0), -1);    // local 0
  EXPECT_EQ(FirstMismatch(dst_.data() + 200, 100, 6, 300), -1);  // local 3 again
  EXPECT_EQ(FirstNot(dst_.data() + 300, kSize - 300, 0xEE), -1);
}

// Metadata carries at most kMaxMetaPieces pieces (peers refuse a blob with
// more): a registration that would pass it is refused at RegisterMemory, naming
// piece_bytes, instead of exporting a blob no peer loads. Up to the cap, the
// blob loads. (Address space mapped, never touched: registering reads nothing.)
TEST(RegisterMemoryTest, MorePiecesThanMetadataCarriesAreRefused) {
  constexpr uint64_t kPiece = 4096, kHalf = core::kMaxMetaPieces / 2 * kPiece;
  AgentOptions o = OptionsFor("a", "tcp");
  o.piece_bytes = kPiece;
  auto a = Agent::Create(o);
  o.name = "b";
  auto b = Agent::Create(o);
  ASSERT_TRUE(a.ok() && b.ok());
  const uint64_t span = 2 * kHalf + 2 * kPiece;
  void* va = mmap(nullptr, span, PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  ASSERT_NE(va, MAP_FAILED);
  auto* base = static_cast<uint8_t*>(va);
  EXPECT_EQ(a.value()->RegisterMemory(base, ~uint64_t{0} / 2).status().code(),
            Code::kInvalidArgument)
      << "a wild length, refused before it allocates a piece";
  auto too_many = a.value()->RegisterMemory(base, 2 * kHalf + 1);
  EXPECT_EQ(too_many.status().code(), Code::kInvalidArgument);
  EXPECT_NE(too_many.status().message().find("piece_bytes"), std::string::npos)
      << too_many.status().ToString();
  ASSERT_TRUE(a.value()->RegisterMemory(base, kHalf).ok());
  EXPECT_EQ(a.value()->RegisterMemory(base + kHalf, kHalf + 1).status().code(),
            Code::kInvalidArgument)
      << "the cap counts every registration";
  ASSERT_TRUE(a.value()->RegisterMemory(base + kHalf, kHalf).ok()) << "exactly the cap";
  auto blob = a.value()->ExportMetadata();
  ASSERT_TRUE(blob.ok());
  auto loaded = b.value()->LoadPeer(blob.value());
  EXPECT_TRUE(loaded.ok()) << loaded.status().ToString();
  a.value().reset();
  munmap(va, span);
}

// Every out-of-range option is refused at Create with an error naming it.
// A failed connect says what kind of failure it was: no enabled transport that
// reaches the peer is kNotSupported (a configuration matter), a peer that is not
// there any more is kRemoteDisconnect. (A peer that answers and refuses is
// kNotAllowed: handshake_test, peer_conn_limit_test.)
TEST(ConnectFailureTest, NoRouteIsNotSupportedAndAGonePeerIsRemoteDisconnect) {
  auto a = Agent::Create(OptionsFor("a", "shm"));
  auto b = Agent::Create(OptionsFor("b", "tcp"));
  ASSERT_TRUE(a.ok() && b.ok());
  Connect(*a.value(), *b.value());  // a only speaks shm, b only listens on tcp
  const Status none = a.value()->PeerTransport("b").status();
  EXPECT_EQ(none.code(), Code::kNotSupported) << none.ToString();
  EXPECT_NE(none.message().find("no enabled transport moves host to host memory to it (this "
                                "agent's shm cannot reach it; the peer offers tcp)"),
            std::string::npos)
      << none.ToString();

  auto c = Agent::Create(OptionsFor("c", "tcp"));
  ASSERT_TRUE(c.ok());
  Connect(*c.value(), *b.value());
  b.value().reset();  // nothing listens at b's address now
  const Status gone = c.value()->PeerTransport("b").status();
  EXPECT_EQ(gone.code(), Code::kRemoteDisconnect) << gone.ToString();
}

// A notification to a peer that is gone fails with the host connect's reason
// alone: the device-memory channel it tried next (no transport of this agent
// moves device memory) added an unrelated second reason.
TEST(ConnectFailureTest, ANotificationToAGonePeerSaysWhyOnce) {
  auto b = Agent::Create(OptionsFor("b", "tcp"));
  auto c = Agent::Create(OptionsFor("c", "tcp"));
  ASSERT_TRUE(b.ok() && c.ok());
  Connect(*c.value(), *b.value());
  b.value().reset();  // nothing listens at b's address now
  const Status s = c.value()->SendNotification("b", "ready");
  EXPECT_EQ(s.code(), Code::kRemoteDisconnect) << s.ToString();
  EXPECT_EQ(s.message().find("device memory"), std::string::npos) << s.ToString();
}

// A fixed lane outside the channel's is refused before any connection is
// made for it: with the peer gone, the error is the lane's, not a failed
// connect (which the same transfer on any lane does meet).
TEST(ConnectFailureTest, ALaneOutOfRangeIsRefusedBeforeConnecting) {
  std::vector<uint8_t> src(64, 1), dst(64, 0);
  auto b = Agent::Create(OptionsFor("b", "tcp"));
  auto c = Agent::Create(OptionsFor("c", "tcp"));
  ASSERT_TRUE(b.ok() && c.ok());
  ASSERT_TRUE(b.value()->RegisterMemory(dst.data(), dst.size()).ok());
  ASSERT_TRUE(c.value()->RegisterMemory(src.data(), src.size()).ok());
  Connect(*c.value(), *b.value());
  b.value().reset();  // nothing listens at b's address now
  auto bad =
      MakeSimple(*c.value(), "b", Op::kWrite, src.data(), dst.data(), 64, {}, XferOptions{2});
  EXPECT_EQ(bad.status().code(), Code::kInvalidArgument) << bad.status().ToString();
  EXPECT_NE(bad.status().message().find("lane 2 is not a lane of the channel (0..1"),
            std::string::npos)
      << bad.status().ToString();
  // (A test running beside this one may have taken b's port since: any failed
  // connect will do, the lane's refusal is what matters.)
  auto any =
      MakeSimple(*c.value(), "b", Op::kWrite, src.data(), dst.data(), 64, {}, XferOptions{-1});
  EXPECT_FALSE(any.ok());
  EXPECT_NE(any.status().code(), Code::kInvalidArgument) << any.status().ToString();
}

// The finding: MakeTransfer connected to the peer before it checked the pairs, so a
// bad transfer to an unreachable peer read as a failed connect (after the connect's
// wait), not as what was wrong with it. Every pair check, and the slot count, now
// comes before any connection is made.
TEST(ConnectFailureTest, BadPairsAndFullSlotsAreRefusedBeforeConnecting) {
  std::vector<uint8_t> src(256, 1), dst(256, 0), ro(64, 0);
  auto b = Agent::Create(OptionsFor("b", "tcp"));
  AgentOptions co = OptionsFor("c", "tcp");
  co.max_requests = 1;
  auto c = Agent::Create(co);
  ASSERT_TRUE(b.ok() && c.ok());
  ASSERT_TRUE(b.value()->RegisterMemory(dst.data(), dst.size()).ok());
  ASSERT_TRUE(b.value()
                  ->RegisterMemory(ro.data(), ro.size(), MemoryKind::kHost, 0, Access::kReadOnly)
                  .ok());
  ASSERT_TRUE(c.value()->RegisterMemory(src.data(), src.size()).ok());
  Connect(*c.value(), *b.value());
  DescList l, r;
  l.Add(src.data(), 64);
  l.Add(src.data() + 64, 128);
  r.Add(dst.data(), 64);
  r.Add(dst.data() + 32, 64);  // overlaps remote 0
  r.Add(ro.data(), 64);
  auto lp = c.value()->PrepareLocal(l);
  auto rp = c.value()->PrepareRemote("b", r);
  ASSERT_TRUE(lp.ok() && rp.ok());
  b.value().reset();  // nothing listens at b's address now
  auto make = [&](Op op, std::vector<uint32_t> li, std::vector<uint32_t> ri) {
    return c.value()->MakeTransfer(op, lp.value(), li, rp.value(), ri).status();
  };
  const std::vector<std::pair<Status, std::string>> refused = {
      {make(Op::kWrite, {0}, {0, 1}), "lists differ in length"},
      {make(Op::kWrite, {0}, {7}), "index out of range"},
      {make(Op::kWrite, {1}, {0}), "local length 128 != remote length 64"},
      {make(Op::kWrite, {0, 0}, {0, 1}), "remote destinations of the transfer overlap"},
      {make(Op::kRead, {0, 0}, {0, 2}), "local destinations of the transfer overlap"}};
  for (const auto& [s, why] : refused) {
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
    EXPECT_NE(s.message().find(why), std::string::npos) << s.ToString();
  }
  const Status into_ro = make(Op::kWrite, {0}, {2});
  EXPECT_EQ(into_ro.code(), Code::kNotAllowed) << into_ro.ToString();
  // c's one slot held by a transfer to a live peer d: a transfer to b is refused for
  // the slot at once. Released, a transfer to b fails its connect and gives the slot
  // back: d's next transfer gets it.
  std::vector<uint8_t> ddst(64, 0);
  auto d = Agent::Create(OptionsFor("d", "tcp"));
  ASSERT_TRUE(d.ok());
  ASSERT_TRUE(d.value()->RegisterMemory(ddst.data(), ddst.size()).ok());
  Connect(*c.value(), *d.value());
  auto held = MakeSimple(*c.value(), "d", Op::kWrite, src.data(), ddst.data(), 64);
  ASSERT_TRUE(held.ok()) << held.status().ToString();
  const Status full = make(Op::kWrite, {0}, {0});
  EXPECT_EQ(full.code(), Code::kNotAllowed) << full.ToString();
  EXPECT_NE(full.message().find("transfer slots are in use"), std::string::npos) << full.ToString();
  ASSERT_TRUE(c.value()->Release(&held.value()).ok());
  const Status gone = make(Op::kWrite, {0}, {0});
  EXPECT_FALSE(gone.ok());
  EXPECT_NE(gone.code(), Code::kInvalidArgument) << gone.ToString();  // the failed connect
  EXPECT_NE(gone.code(), Code::kNotAllowed) << gone.ToString();
  auto again = MakeSimple(*c.value(), "d", Op::kWrite, src.data(), ddst.data(), 64);
  EXPECT_TRUE(again.ok()) << again.status().ToString();
}

TEST(AgentOptionsTest, OutOfRangeOptionsAreRefusedByName) {
  struct Case {
    const char* field;
    void (*spoil)(AgentOptions&);
  };
  const Case cases[] = {
      {"lanes_per_peer", [](AgentOptions& o) { o.lanes_per_peer = 0; }},
      {"chunk_bytes", [](AgentOptions& o) { o.chunk_bytes = 100; }},
      {"lane_ring_slots", [](AgentOptions& o) { o.lane_ring_slots = 3; }},
      {"lane_ring_slots", [](AgentOptions& o) { o.lane_ring_slots = 1u << 25; }},
      {"transports", [](AgentOptions& o) { o.transports = {"carrier-pigeon"}; }},
      {"transports", [](AgentOptions& o) { o.transports = {}; }},
      {"transports",
       [](AgentOptions& o) {
         o.transports = {"tcp", "shm", "tcp"};
       }},
      {"policy", [](AgentOptions& o) { o.policy = static_cast<ProgressPolicy>(2); }},
      {"cuda_proxy_blocks", [](AgentOptions& o) { o.cuda_proxy_blocks = 9; }},
      {"cuda_proxy_max_bytes", [](AgentOptions& o) { o.cuda_proxy_max_bytes = 32ull << 20; }},
      {"cuda_proxy_idle_exit", [](AgentOptions& o) { o.cuda_proxy_idle_exit = 2s; }},
      {"cuda_proxy_idle_exit", [](AgentOptions& o) { o.cuda_proxy_idle_exit = -1us; }},
      {"max_notification_bytes", [](AgentOptions& o) { o.max_notification_bytes = 100; }},
      {"max_notification_bytes_per_peer",
       [](AgentOptions& o) { o.max_notification_bytes_per_peer = o.max_notification_bytes + 1; }},
      {"max_conns_per_peer", [](AgentOptions& o) { o.max_conns_per_peer = 0; }},
      {"max_conns_per_peer", [](AgentOptions& o) { o.max_conns_per_peer = 4097; }},
      {"cuda_proxy_renew_every", [](AgentOptions& o) { o.cuda_proxy_renew_every = 50us; }},
      {"staging_copy", [](AgentOptions& o) { o.staging_copy = static_cast<StagingCopy>(7); }},
      {"tcp_keepalive", [](AgentOptions& o) { o.tcp_keepalive = -1s; }},
      {"tcp_keepalive", [](AgentOptions& o) { o.tcp_keepalive = 32768s; }},
      {"piece_bytes", [](AgentOptions& o) { o.piece_bytes = 4095; }},
      {"piece_bytes", [](AgentOptions& o) { o.piece_bytes = AgentOptions::kMaxPieceBytes + 1; }},
      {"post_timeout", [](AgentOptions& o) { o.post_timeout = 0ms; }},
      {"post_timeout", [](AgentOptions& o) { o.post_timeout = AgentOptions::kMaxTimeout + 1ms; }},
      {"connect_timeout",
       [](AgentOptions& o) { o.connect_timeout = AgentOptions::kMaxTimeout + 1ms; }},
      {"io_timeout", [](AgentOptions& o) { o.io_timeout = -1ms; }},
      {"io_timeout", [](AgentOptions& o) { o.io_timeout = AgentOptions::kMaxTimeout + 1ms; }},
      {"io_timeout", [](AgentOptions& o) { o.io_timeout = std::chrono::milliseconds::max(); }},
      {"spin", [](AgentOptions& o) { o.spin = -1us; }},
      {"spin", [](AgentOptions& o) { o.spin = AgentOptions::kMaxSpin + 1us; }},
  };
  for (const Case& c : cases) {
    AgentOptions o;
    o.name = "opts";
    c.spoil(o);
    auto a = Agent::Create(o);
    ASSERT_FALSE(a.ok()) << c.field;
    EXPECT_EQ(a.status().code(), Code::kInvalidArgument) << c.field;
    EXPECT_NE(a.status().message().find(c.field), std::string::npos) << a.status().ToString();
  }
}

// Host memory is registered only where this process may read and write it,
// whatever its Access (which limits peers: this agent's own READs may land in
// any of its regions): a reserved range without access (what a device pointer
// is on the host), a read-only mapping (kReadOnly too) and an unmapped hole are
// refused by RegisterMemory, naming the first byte that is not. Nothing is
// registered by a refusal: the range registers once it is mapped.
TEST(RegisterMemoryTest, HostMemoryMustBeMappedReadableAndWritable) {
  auto a = Agent::Create(OptionsFor("a", "tcp"));
  ASSERT_TRUE(a.ok());
  Agent& agent = *a.value();
  const long page = sysconf(_SC_PAGESIZE);
  const int flags = MAP_PRIVATE | MAP_ANONYMOUS;
  auto* none = static_cast<uint8_t*>(mmap(nullptr, 2 * page, PROT_NONE, flags, -1, 0));
  auto* ro = static_cast<uint8_t*>(mmap(nullptr, 2 * page, PROT_READ, flags, -1, 0));
  auto* rw = static_cast<uint8_t*>(mmap(nullptr, 3 * page, PROT_READ | PROT_WRITE, flags, -1, 0));
  ASSERT_TRUE(none != MAP_FAILED && ro != MAP_FAILED && rw != MAP_FAILED);
  ASSERT_EQ(munmap(rw + page, page), 0);  // a hole between two rw pages
  auto refused = [&](void* p, uint64_t n, Access access, const std::string& what) {
    auto r = agent.RegisterMemory(p, n, MemoryKind::kHost, 0, access);
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << what;
    EXPECT_NE(r.status().message().find(what), std::string::npos) << r.status().ToString();
  };
  refused(none, page, Access::kReadOnly, "is not readable and writable in this process");
  refused(ro, page, Access::kReadWrite, "read-only memory cannot be registered");
  refused(ro, page, Access::kReadOnly, "read-only memory cannot be registered");
  refused(rw, 2 * page, Access::kReadWrite, "is not mapped in this process");
  EXPECT_TRUE(agent.RegisterMemory(rw, page).ok());
  ASSERT_EQ(mprotect(none, 2 * page, PROT_READ | PROT_WRITE), 0);
  EXPECT_TRUE(agent.RegisterMemory(none, 2 * page).ok()) << "nothing left of the refusals";
  a.value().reset();
  munmap(none, 2 * page);
  munmap(ro, 2 * page);
  munmap(rw, page);
  munmap(rw + 2 * page, page);
}

// CheckHostMapped over a maps text: a range may span adjacent mappings; a gap,
// a mapping without the access, or a range past the last mapping is refused,
// naming the first byte that is not covered.
TEST(HostMappingTest, ARangeMustLieInMappingsWithTheAccess) {
  const std::string maps =
      "1000-3000 rw-p 00000000 00:00 0\n"
      "3000-4000 r--p 00000000 00:00 0 /lib/x.so\n"
      "4000-5000 rw-s 00000000 00:05 7 /dev/shm/y\n"
      "6000-7000 ---p 00000000 00:00 0\n"
      "7000-8000 rwxp 00000000 00:00 0 [stack]\n";
  auto code = [&](uint64_t addr, uint64_t len, bool writable) {
    return core::CheckHostMappedIn(maps, addr, len, writable).code();
  };
  EXPECT_EQ(code(0x1000, 0x2000, true), Code::kOk) << "one mapping, whole";
  EXPECT_EQ(code(0x2000, 0x3000, false), Code::kOk) << "three adjacent mappings, read";
  EXPECT_EQ(code(0x2000, 0x2000, true), Code::kInvalidArgument) << "a read-only one inside";
  EXPECT_EQ(code(0x4800, 0x1000, false), Code::kInvalidArgument) << "a gap at 0x5000";
  EXPECT_EQ(code(0x6000, 0x10, false), Code::kInvalidArgument) << "no access";
  EXPECT_EQ(code(0x7000, 0x1000, true), Code::kOk) << "the last mapping";
  EXPECT_EQ(code(0x7800, 0x1000, false), Code::kInvalidArgument) << "past the last";
  EXPECT_EQ(code(0x800, 0x1000, false), Code::kInvalidArgument) << "before the first";
  const Status gap = core::CheckHostMappedIn(maps, 0x4800, 0x1000, false);
  EXPECT_NE(gap.message().find("at 0x5000 is not mapped"), std::string::npos) << gap.ToString();
  const Status ro = core::CheckHostMappedIn(maps, 0x2000, 0x2000, true);
  EXPECT_NE(ro.message().find("at 0x3000 is not readable and writable"), std::string::npos)
      << ro.ToString();
}

// A memory kind that is neither kHost nor kCuda is refused, not exported in a
// blob that no peer would load.
TEST(RegisterMemoryTest, AnUnknownMemoryKindIsRefused) {
  auto a = Agent::Create(OptionsFor("a", "tcp"));
  ASSERT_TRUE(a.ok());
  std::vector<uint8_t> buf(4096);
  auto r = a.value()->RegisterMemory(buf.data(), buf.size(), static_cast<MemoryKind>(5));
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << r.status().ToString();
  auto blob = a.value()->ExportMetadata();
  ASSERT_TRUE(blob.ok());
  auto b = Agent::Create(OptionsFor("b", "tcp"));
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(b.value()->LoadPeer(blob.value()).ok());
}

// Transports not built into the library are left out of an agent; one left with
// none is refused at Create, naming them (a build without CUDA and only "cuda").
TEST(AgentOptionsTest, AgentWithNoTransportBuiltInIsRefused) {
#if KVLANE_TEST_HAVE_CUDA
  GTEST_SKIP() << "this library has the cuda transport";
#else
  AgentOptions o = OptionsFor("a", "cuda");
  auto only_cuda = Agent::Create(o);
  EXPECT_EQ(only_cuda.status().code(), Code::kNotSupported) << only_cuda.status().ToString();
  EXPECT_NE(only_cuda.status().message().find("no transport of AgentOptions.transports (cuda)"),
            std::string::npos)
      << only_cuda.status().ToString();
  o.transports = {"cuda", "tcp"};
  auto with_tcp = Agent::Create(o);
  EXPECT_TRUE(with_tcp.ok()) << with_tcp.status().ToString();
#endif
}

// An agent whose only transport is cuda, on a host where no CUDA device is
// visible, could reach no peer and no peer it: refused at Create with the
// reason, not at the first connect. CUDA_VISIBLE_DEVICES hides every device
// from CUDA's first use in the process (ctest runs each test in its own).
TEST(AgentOptionsTest, ACudaOnlyAgentWithNoDeviceIsRefused) {
#if !KVLANE_TEST_HAVE_CUDA
  GTEST_SKIP() << "this library has no cuda transport (AgentWithNoTransportBuiltInIsRefused)";
#else
  ASSERT_EQ(setenv("CUDA_VISIBLE_DEVICES", "", 1), 0);
  struct Unset {
    ~Unset() { unsetenv("CUDA_VISIBLE_DEVICES"); }
  } unset;
  AgentOptions o = OptionsFor("a", "cuda");
  auto only_cuda = Agent::Create(o);
  EXPECT_EQ(only_cuda.status().code(), Code::kNotSupported) << only_cuda.status().ToString();
  EXPECT_NE(only_cuda.status().message().find("works on this host (cuda: no CUDA device"),
            std::string::npos)
      << only_cuda.status().ToString();
  o.transports = {"cuda", "tcp"};  // tcp works: the agent is created, cuda idle
  auto with_tcp = Agent::Create(o);
  EXPECT_TRUE(with_tcp.ok()) << with_tcp.status().ToString();
#endif
}

// Each agent's slots start at their own random generation: a handle of another
// agent (the same slot, each agent's first transfer) is stale here, kNotFound for
// every call, and never posts or releases this agent's transfer in that slot.
TEST_P(BadInputTest, AnotherAgentsHandleIsStaleHere) {
  Connect(b(), a());
  auto ha = MakeSimple(a(), "b", Op::kWrite, src_.data(), dst_.data(), 64);
  auto hb = MakeSimple(b(), "a", Op::kRead, dst_.data(), src_.data(), 64);
  ASSERT_TRUE(ha.ok() && hb.ok());
  ASSERT_EQ(ha->slot, hb->slot) << "each agent's first transfer takes its first slot";
  EXPECT_NE(ha->gen, hb->gen);
  XferHandle foreign = ha.value();
  EXPECT_EQ(b().Check(foreign).code(), Code::kNotFound);
  EXPECT_EQ(b().Post(&foreign).code(), Code::kNotFound);
  EXPECT_EQ(b().Cancel(foreign).code(), Code::kNotFound);
  EXPECT_EQ(b().Release(&foreign).code(), Code::kNotFound);
  EXPECT_TRUE(DstUntouched()) << "b's READ ran";
  ASSERT_TRUE(PostAndWait(b(), &hb.value()).ok()) << "b's own transfer is alive";
  EXPECT_EQ(FirstMismatch(dst_.data(), 64, 6), -1);
}

// Each agent numbers its prepared lists from its own random start: a list id of
// another agent is unknown here (kNotFound), not one of this agent's lists.
TEST(PreparedIdTest, AnotherAgentsListIdIsUnknown) {
  auto a = Agent::Create(OptionsFor("a", "tcp"));
  auto b = Agent::Create(OptionsFor("b", "tcp"));
  ASSERT_TRUE(a.ok() && b.ok());
  std::vector<uint8_t> buf(4096);
  ASSERT_TRUE(a.value()->RegisterMemory(buf.data(), 2048).ok());
  ASSERT_TRUE(b.value()->RegisterMemory(buf.data() + 2048, 2048).ok());
  DescList la, lb;
  la.Add(buf.data(), 2048);
  lb.Add(buf.data() + 2048, 2048);
  auto pa = a.value()->PrepareLocal(la);
  auto pb = b.value()->PrepareLocal(lb);
  ASSERT_TRUE(pa.ok() && pb.ok());
  EXPECT_TRUE(pa->valid() && pb->valid());
  EXPECT_NE(pa->value, pb->value);
  EXPECT_EQ(a.value()->ReleasePrepared(pb.value()).code(), Code::kNotFound);
  EXPECT_TRUE(a.value()->ReleasePrepared(pa.value()).ok());
}

// The bounds themselves are taken: the largest piece_bytes (a region is cut
// into exactly its pieces however large: RegistryTest), timeouts of 24 h and a
// spin of 1 s (no sum the engine forms from them overflows). One past each is
// refused by name (OutOfRangeOptionsAreRefusedByName).
TEST(AgentOptionsTest, DurationAndPieceBoundsAreTaken) {
  AgentOptions o;
  o.name = "opts";
  o.piece_bytes = AgentOptions::kMaxPieceBytes;
  o.post_timeout = o.connect_timeout = o.io_timeout = AgentOptions::kMaxTimeout;
  o.spin = AgentOptions::kMaxSpin;
  auto a = Agent::Create(o);
  EXPECT_TRUE(a.ok()) << a.status().ToString();
  o.io_timeout += 1ms;
  auto refused = Agent::Create(o);
  EXPECT_EQ(refused.status().code(), Code::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("io_timeout must be 1 ms..24 h, got 86400001 ms"),
            std::string::npos)
      << refused.status().ToString();
}

// The per-peer limits take their whole range; a share is bounded by the
// agent's max_notification_bytes, whichever it is, and the error says so.
TEST(AgentOptionsTest, PerPeerLimitsTakeTheirRange) {
  AgentOptions o;
  o.name = "opts";
  EXPECT_EQ(o.max_notification_bytes_per_peer, 0u);  // a quarter of max_notification_bytes
  EXPECT_EQ(o.max_conns_per_peer, 256u);
  o.max_notification_bytes = 8192;
  for (uint64_t share : {uint64_t{0}, uint64_t{202}, uint64_t{8192}}) {
    o.max_notification_bytes_per_peer = share;
    EXPECT_TRUE(o.Validate().ok()) << share;
  }
  for (uint64_t share : {uint64_t{1}, uint64_t{201}}) {  // no notification would ever fit
    o.max_notification_bytes_per_peer = share;
    EXPECT_NE(o.Validate().message().find("must be 202..max_notification_bytes"), std::string::npos)
        << share << ": " << o.Validate().ToString();
  }
  o.max_notification_bytes_per_peer = 8193;
  EXPECT_NE(o.Validate().message().find("202..max_notification_bytes (8192)"), std::string::npos)
      << o.Validate().ToString();
  o.max_notification_bytes_per_peer = 0;
  for (uint32_t cap : {1u, 4096u}) {
    o.max_conns_per_peer = cap;
    EXPECT_TRUE(o.Validate().ok()) << cap;
  }
}

// Staging copy names round-trip; an unknown one is refused naming the choices.
TEST(AgentOptionsTest, StagingCopyNamesParse) {
  for (StagingCopy c : {StagingCopy::kBatch, StagingCopy::kEach, StagingCopy::kKernel}) {
    auto parsed = ParseStagingCopy(StagingCopyName(c));
    ASSERT_TRUE(parsed.ok()) << StagingCopyName(c);
    EXPECT_EQ(*parsed, c);
  }
  EXPECT_EQ(AgentOptions{}.staging_copy, StagingCopy::kBatch);
  auto bad = ParseStagingCopy("dma");
  ASSERT_EQ(bad.status().code(), Code::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("batch, each or kernel"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Transports, BadInputTest, ::testing::Values("local", "shm", "tcp"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace kvlane::test
