// Bad input: descriptors outside regions, zero lengths, mismatched lists,
// unknown peers, malformed metadata. Each gets a clear status; nothing moves.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstring>
#include <random>

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

// A fixed lane past the channel's lanes (lanes_per_peer, 2 here) is refused at
// MakeTransfer, naming the range; the last lane and "the engine picks" are taken.
TEST_P(BadInputTest, AFixedLanePastTheChannelsLanesIsRefused) {
  ASSERT_EQ(a().options().lanes_per_peer, 2);
  auto past = MakeSimple(a(), "b", Op::kWrite, src_.data(), dst_.data(), 64, {}, XferOptions{2});
  EXPECT_EQ(past.status().code(), Code::kInvalidArgument);
  EXPECT_NE(past.status().message().find("lane 2 is past the channel's lanes (0..1"),
            std::string::npos)
      << past.status().ToString();
  for (int lane : {1, -7}) {
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
// must not wrap into a small one), and nothing is posted.
TEST_P(BadInputTest, TransfersOverTheByteCapAreRefused) {
  constexpr uint64_t kBig = 1ull << 30;  // reserved, never touched
  void* va = mmap(nullptr, 2 * kBig, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  ASSERT_NE(va, MAP_FAILED);
  auto* base = static_cast<uint8_t*>(va);
  ASSERT_TRUE(a().RegisterMemory(base, kBig).ok());
  ASSERT_TRUE(b().RegisterMemory(base + kBig, kBig).ok());
  Connect(a(), b());
  DescList l, r;
  l.Add(base, kBig);
  r.Add(base + kBig, kBig);
  auto lp = a().PrepareLocal(l);
  auto rp = a().PrepareRemote("b", r);
  ASSERT_TRUE(lp.ok() && rp.ok());
  constexpr uint64_t kFit = kMaxTransferBytes / kBig;  // 1024 x 1 GiB: exactly the cap
  std::vector<uint32_t> idx(kFit + 1, 0);
  auto over = a().MakeTransfer(Op::kWrite, lp.value(), idx, rp.value(), idx);
  EXPECT_EQ(over.status().code(), Code::kInvalidArgument) << over.status().ToString();
  EXPECT_NE(over.status().message().find("1 TiB"), std::string::npos) << over.status().ToString();
  idx.pop_back();
  auto at_cap = a().MakeTransfer(Op::kWrite, lp.value(), idx, rp.value(), idx);
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
}

// Metadata carries at most kMaxMetaPieces pieces (peers refuse a blob with
// more): a registration that would pass it is refused at RegisterMemory, naming
// piece_bytes, instead of exporting a blob no peer loads. Up to the cap, the
// blob loads. (Address space reserved, never touched: registering reads nothing.)
TEST(RegisterMemoryTest, MorePiecesThanMetadataCarriesAreRefused) {
  constexpr uint64_t kPiece = 4096, kHalf = core::kMaxMetaPieces / 2 * kPiece;
  AgentOptions o = OptionsFor("a", "tcp");
  o.piece_bytes = kPiece;
  auto a = Agent::Create(o);
  o.name = "b";
  auto b = Agent::Create(o);
  ASSERT_TRUE(a.ok() && b.ok());
  const uint64_t span = 2 * kHalf + 2 * kPiece;
  void* va = mmap(nullptr, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
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
  EXPECT_NE(none.message().find("no enabled transport moves host to host memory"),
            std::string::npos)
      << none.ToString();

  auto c = Agent::Create(OptionsFor("c", "tcp"));
  ASSERT_TRUE(c.ok());
  Connect(*c.value(), *b.value());
  b.value().reset();  // nothing listens at b's address now
  const Status gone = c.value()->PeerTransport("b").status();
  EXPECT_EQ(gone.code(), Code::kRemoteDisconnect) << gone.ToString();
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
      {"transports", [](AgentOptions& o) { o.transports = {"carrier-pigeon"}; }},
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
