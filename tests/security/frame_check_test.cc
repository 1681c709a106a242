// The pure wire checks (transport/stream/frame_check.h) and the metadata
// decoder on hand-made bad input; the fuzzers (fuzz/) cover the rest.
#include "transport/stream/frame_check.h"

#include <gtest/gtest.h>

#include <cstring>

#include "core/bytes.h"
#include "core/metadata.h"
#include "core/plain_text.h"
#include "transport/stream/hello_mac.h"

namespace kvlane::core {
namespace {

FrameHeader Header(FrameType type, uint32_t nseg, uint64_t bytes) {
  FrameHeader h{};
  h.type = static_cast<uint8_t>(type);
  h.nseg = nseg;
  h.bytes = bytes;
  return h;
}

TEST(FrameCheck, HeaderLimits) {
  EXPECT_TRUE(CheckFrameHeader(Header(FrameType::kRead, 1, 1)).ok());
  EXPECT_TRUE(CheckFrameHeader(Header(FrameType::kWrite, kMaxWireSegs, kMaxFrameBytes)).ok());
  EXPECT_FALSE(CheckFrameHeader(Header(FrameType::kWrite, 0, 1)).ok());
  EXPECT_FALSE(CheckFrameHeader(Header(FrameType::kWrite, kMaxWireSegs + 1, 1)).ok());
  EXPECT_FALSE(CheckFrameHeader(Header(FrameType::kRead, 1, 0)).ok());
  EXPECT_FALSE(CheckFrameHeader(Header(FrameType::kRead, 1, kMaxFrameBytes + 1)).ok());
  EXPECT_TRUE(CheckFrameHeader(Header(FrameType::kNotify, 0, kMaxNotifyBytes)).ok());
  EXPECT_FALSE(CheckFrameHeader(Header(FrameType::kNotify, 0, kMaxNotifyBytes + 1)).ok());
  EXPECT_FALSE(CheckFrameHeader(Header(FrameType::kNotify, 1, 0)).ok());
  EXPECT_TRUE(CheckFrameHeader(Header(FrameType::kNop, 0, 0)).ok());
  EXPECT_FALSE(CheckFrameHeader(Header(FrameType::kNop, 0, 1)).ok());
  for (int t : {0, 5, 100, 255}) EXPECT_FALSE(CheckFrameHeader(Header(static_cast<FrameType>(t), 0, 0)).ok());
}

TEST(FrameCheck, SegmentsMustAddUp) {
  FrameHeader h = Header(FrameType::kWrite, 2, 48);
  WireSeg ok[2] = {{1, 0x1000, 16, 0}, {1, 0x2000, 32, 0}};
  EXPECT_TRUE(CheckSegments(h, ok).ok());
  WireSeg zero[2] = {{1, 0x1000, 48, 0}, {1, 0x2000, 0, 0}};
  EXPECT_FALSE(CheckSegments(h, zero).ok());
  WireSeg wrap[2] = {{1, 0x1000, 64, 0}, {1, 0x2000, UINT64_MAX - 15, 0}};  // sums to 48 mod 2^64
  EXPECT_FALSE(CheckSegments(h, wrap).ok());
  EXPECT_FALSE(CheckSegments(h, std::span<const WireSeg>(ok, 1)).ok());
}

// A Hello as a real initiator makes it for `server` (the challenge's nonce).
struct SignedHello {
  StreamHello h{};
  std::string name = "abc";
};
SignedHello Sign(const Secret& secret, const Nonce& server, uint64_t id = 42,
                 uint16_t version = kWireVersion, std::string name = "abc") {
  SignedHello s;
  s.name = std::move(name);
  s.h.magic = kHelloMagic;
  s.h.version = version;
  s.h.name_len = static_cast<uint8_t>(s.name.size());
  s.h.target_id = id;
  s.h.nonce.fill(0x5c);
  s.h.proof = HelloProof(secret, server, s.h.nonce, id, version, s.name);
  return s;
}

Secret TestSecret(uint8_t seed) {
  Secret secret{};
  for (size_t i = 0; i < secret.size(); ++i) secret[i] = static_cast<uint8_t>(i * 7 + seed);
  return secret;
}

Nonce TestNonce(uint8_t fill) {
  Nonce n;
  n.fill(fill);
  return n;
}

TEST(FrameCheck, HelloWithItsProofIsAccepted) {
  const Secret secret = TestSecret(1);
  const Nonce server = TestNonce(0x11);
  SignedHello s = Sign(secret, server);
  EXPECT_TRUE(CheckHello(s.h, s.name, 42, secret, server).ok());
}

TEST(FrameCheck, HelloWithAWrongProofIsRefused) {
  const Secret secret = TestSecret(1);
  const Nonce server = TestNonce(0x11);
  for (size_t byte : {size_t{0}, size_t{17}, size_t{31}}) {
    SignedHello s = Sign(secret, server);
    s.h.proof[byte] ^= 0x01;
    EXPECT_EQ(CheckHello(s.h, s.name, 42, secret, server).code(), Code::kNotAllowed) << byte;
  }
  SignedHello zero = Sign(secret, server);
  zero.h.proof = {};
  EXPECT_EQ(CheckHello(zero.h, zero.name, 42, secret, server).code(), Code::kNotAllowed);
  SignedHello other_secret = Sign(TestSecret(2), server);
  EXPECT_EQ(CheckHello(other_secret.h, other_secret.name, 42, secret, server).code(),
            Code::kNotAllowed);
  SignedHello renamed = Sign(secret, server);  // the proof covers the name
  renamed.name = "abd";
  EXPECT_EQ(CheckHello(renamed.h, renamed.name, 42, secret, server).code(), Code::kNotAllowed);
  SignedHello new_nonce = Sign(secret, server);  // and the initiator's nonce
  new_nonce.h.nonce[0] ^= 1;
  EXPECT_EQ(CheckHello(new_nonce.h, new_nonce.name, 42, secret, server).code(), Code::kNotAllowed);
}

// What a replayed Hello is: a valid proof, made for another connection's challenge.
TEST(FrameCheck, HelloProvedForAnotherChallengeIsRefused) {
  const Secret secret = TestSecret(1);
  SignedHello s = Sign(secret, TestNonce(0x11));
  ASSERT_TRUE(CheckHello(s.h, s.name, 42, secret, TestNonce(0x11)).ok());
  EXPECT_EQ(CheckHello(s.h, s.name, 42, secret, TestNonce(0x12)).code(), Code::kNotAllowed);
  Nonce one_bit = TestNonce(0x11);
  one_bit[31] ^= 0x80;
  EXPECT_EQ(CheckHello(s.h, s.name, 42, secret, one_bit).code(), Code::kNotAllowed);
}

TEST(FrameCheck, HelloForAnotherAgentIsRefused) {
  const Secret secret = TestSecret(1);
  const Nonce server = TestNonce(0x11);
  SignedHello s = Sign(secret, server, 43);  // a valid proof, for agent 43
  EXPECT_EQ(CheckHello(s.h, s.name, 42, secret, server).code(), Code::kNotAllowed);
  SignedHello relabelled = Sign(secret, server, 43);  // the id changed after signing
  relabelled.h.target_id = 42;
  EXPECT_EQ(CheckHello(relabelled.h, relabelled.name, 42, secret, server).code(),
            Code::kNotAllowed);
}

TEST(FrameCheck, HelloOfAnotherWireVersionIsRefused) {
  const Secret secret = TestSecret(1);
  const Nonce server = TestNonce(0x11);
  for (uint16_t v : {uint16_t{1}, uint16_t(kWireVersion + 1)}) {
    SignedHello s = Sign(secret, server, 42, v);  // proof valid for that version
    EXPECT_EQ(CheckHello(s.h, s.name, 42, secret, server).code(), Code::kNotAllowed) << v;
  }
  SignedHello relabelled = Sign(secret, server);
  relabelled.h.version = 1;
  EXPECT_EQ(CheckHello(relabelled.h, relabelled.name, 42, secret, server).code(),
            Code::kNotAllowed);
}

TEST(FrameCheck, HelloNeedsMagicAndAName) {
  const Secret secret = TestSecret(1);
  const Nonce server = TestNonce(0x11);
  SignedHello s = Sign(secret, server);
  s.h.magic = 0;
  EXPECT_EQ(CheckHello(s.h, s.name, 42, secret, server).code(), Code::kNotAllowed);
  SignedHello nameless = Sign(secret, server);
  nameless.name.clear();
  nameless.h.name_len = 0;
  nameless.h.proof = HelloProof(secret, server, nameless.h.nonce, 42, kWireVersion, "");
  EXPECT_EQ(CheckHello(nameless.h, nameless.name, 42, secret, server).code(), Code::kNotAllowed);
  SignedHello short_name = Sign(secret, server);  // fewer name bytes than announced
  short_name.h.name_len = 4;
  EXPECT_EQ(CheckHello(short_name.h, short_name.name, 42, secret, server).code(),
            Code::kNotAllowed);
}

// A proven peer whose name is not plain text (not UTF-8, or a control
// character) is refused: its name would reach notifications, errors and
// bindings that decode it as UTF-8. A UTF-8 name is taken.
TEST(FrameCheck, HelloWithANameThatIsNotPlainTextIsRefused) {
  const Secret secret = TestSecret(1);
  const Nonce server = TestNonce(0x11);
  for (const std::string bad : {std::string("\xff\xfe"), std::string("a\nb"),
                                std::string("a\0b", 3), std::string("\x1b[2J")}) {
    SignedHello s = Sign(secret, server, 42, kWireVersion, bad);
    const Status st = CheckHello(s.h, s.name, 42, secret, server);
    EXPECT_EQ(st.code(), Code::kNotAllowed) << PlainTextOf(bad);
    EXPECT_NE(st.message().find("not plain text"), std::string::npos) << st.ToString();
  }
  SignedHello utf8 = Sign(secret, server, 42, kWireVersion,
                          "pr\xc3\xa4"
                          "fill-\xe2\x82\xac");
  EXPECT_TRUE(CheckHello(utf8.h, utf8.name, 42, secret, server).ok());
}

AgentMeta SampleMeta() {
  AgentMeta m;
  m.name = "target";
  m.agent_id = 7;
  m.pieces = {{11, 0x10000, 4096, 1, MemoryKind::kHost, 0},
              {12, 0x20000, 4096, 2, MemoryKind::kHost, 0, Access::kReadOnly}};
  return m;
}

// Offset of the access byte of the last piece: the blob's last byte.
constexpr size_t kLastAccessFromEnd = 1;

TEST(MetadataDecode, RoundTripAndEveryTruncationFails) {
  std::string blob = EncodeMeta(SampleMeta());
  auto m = DecodeMeta(blob);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_EQ(m->pieces.size(), 2u);
  EXPECT_EQ(m->pieces[0].access, Access::kReadWrite);
  EXPECT_EQ(m->pieces[1].access, Access::kReadOnly);
  EXPECT_EQ(EncodeMeta(m.value()), blob);
  for (size_t n = 0; n < blob.size(); ++n)
    EXPECT_EQ(DecodeMeta(std::string_view(blob).substr(0, n)).status().code(), Code::kInvalidArgument) << n;
  EXPECT_FALSE(DecodeMeta(blob + "x").ok());
}

// A blob whose name, host name, boot id or tcp host is not plain text is
// refused: LoadPeer never stores a peer a binding could not name.
TEST(MetadataDecode, TextThatIsNotPlainIsRefused) {
  for (int field = 0; field < 4; ++field) {
    AgentMeta m = SampleMeta();
    std::string* text[] = {&m.name, &m.hostname, &m.boot_id, &m.tcp_host};
    *text[field] = "x\xc0\xafy";  // an overlong '/'
    const Status st = DecodeMeta(EncodeMeta(m)).status();
    EXPECT_EQ(st.code(), Code::kInvalidArgument) << field;
    EXPECT_EQ(st.message().rfind("metadata: ", 0), 0u) << st.ToString();
    *text[field] = "x\ty";  // a control character
    EXPECT_EQ(DecodeMeta(EncodeMeta(m)).status().code(), Code::kInvalidArgument) << field;
  }
}

TEST(MetadataDecode, RejectsInconsistentPieces) {
  auto bad = [](auto mutate) {
    AgentMeta m = SampleMeta();
    mutate(m);
    return DecodeMeta(EncodeMeta(m)).status().code();
  };
  EXPECT_EQ(bad([](AgentMeta& m) { m.pieces[1].base = m.pieces[0].base + 100; }), Code::kInvalidArgument);
  EXPECT_EQ(bad([](AgentMeta& m) { std::swap(m.pieces[0], m.pieces[1]); }), Code::kInvalidArgument);
  EXPECT_EQ(bad([](AgentMeta& m) { m.pieces[0].len = 0; }), Code::kInvalidArgument);
  EXPECT_EQ(bad([](AgentMeta& m) { m.pieces[0].key = 0; }), Code::kInvalidArgument);
  EXPECT_EQ(bad([](AgentMeta& m) { m.pieces[1].base = UINT64_MAX - 10; }), Code::kInvalidArgument);
  EXPECT_EQ(bad([](AgentMeta& m) { m.pieces[0].kind = static_cast<MemoryKind>(9); }), Code::kInvalidArgument);
  EXPECT_EQ(bad([](AgentMeta& m) { m.name.clear(); }), Code::kInvalidArgument);
  EXPECT_EQ(bad([](AgentMeta& m) { m.name.assign(300, 'n'); }), Code::kInvalidArgument);
}

TEST(MetadataDecode, UnknownAccessValuesAreRejected) {
  std::string blob = EncodeMeta(SampleMeta());
  ASSERT_EQ(blob.back(), static_cast<char>(Access::kReadOnly));
  for (int v = 0; v < 256; ++v) {
    blob[blob.size() - kLastAccessFromEnd] = static_cast<char>(v);
    auto m = DecodeMeta(blob);
    if (v <= 1) {
      ASSERT_TRUE(m.ok()) << v;
      EXPECT_EQ(m->pieces[1].access, static_cast<Access>(v));
      continue;
    }
    EXPECT_EQ(m.status().code(), Code::kInvalidArgument) << v;
    EXPECT_NE(m.status().message().find("unknown access"), std::string::npos)
        << m.status().ToString();
  }
}

// A blob of another format version is refused on its version, before any
// field is parsed, with both versions named.
TEST(MetadataDecode, OtherVersionsAreRefusedClearly) {
  const std::string blob = EncodeMeta(SampleMeta());
  for (uint16_t v : {uint16_t{0}, uint16_t{1}, uint16_t{kMetaVersion + 1}, uint16_t{0xffff}}) {
    std::string b = blob;
    std::memcpy(b.data() + 4, &v, sizeof(v));  // after the magic
    auto m = DecodeMeta(b);
    EXPECT_EQ(m.status().code(), Code::kInvalidArgument) << v;
    const std::string& msg = m.status().message();
    EXPECT_NE(msg.find("version " + std::to_string(v)), std::string::npos) << msg;
    EXPECT_NE(msg.find("reads version " + std::to_string(kMetaVersion)), std::string::npos) << msg;
    EXPECT_NE(msg.find(v < kMetaVersion ? "older" : "newer"), std::string::npos) << msg;
  }
}

// A blob in the layout of version 1 (pieces without their access byte) from an
// older kvlane: refused, never read as a shorter or shifted piece table.
TEST(MetadataDecode, VersionOneBlobIsNotMisparsed) {
  ByteWriter w;
  w.Put(kMetaMagic);
  w.Put(uint16_t{1});
  w.PutString("old");
  w.Put(uint64_t{7});
  const Secret secret{};
  w.PutRaw(secret.data(), secret.size());
  w.Put(uint64_t{0});                           // process token
  w.Put(uint32_t{0});                           // pid
  for (int i = 0; i < 3; ++i) w.PutString("");  // hostname, boot id, tcp host
  w.Put(uint16_t{0});
  for (int i = 0; i < 2; ++i) w.PutString("");  // shm socket, cuda blob
  w.Put(uint32_t{1});
  for (uint64_t v : {uint64_t{11}, uint64_t{0x10000}, uint64_t{4096}, uint64_t{1}}) w.Put(v);
  w.Put(uint8_t{0});
  w.Put(int32_t{0});
  auto m = DecodeMeta(w.str());
  EXPECT_EQ(m.status().code(), Code::kInvalidArgument);
  EXPECT_NE(m.status().message().find("older kvlane"), std::string::npos) << m.status().ToString();
}

TEST(MetadataDecode, HugeCountsFailWithoutAllocating) {
  std::string blob = EncodeMeta(SampleMeta());
  // The piece count is the u32 before the 2 x 38-byte piece table at the end.
  size_t count_at = blob.size() - 2 * 38 - 4;
  uint32_t huge = 0xffffffffu;
  std::memcpy(blob.data() + count_at, &huge, 4);
  EXPECT_FALSE(DecodeMeta(blob).ok());
  // A string length far beyond the blob.
  std::string b2 = EncodeMeta(SampleMeta());
  std::memcpy(b2.data() + 6, &huge, 4);  // name length, after magic + version
  EXPECT_FALSE(DecodeMeta(b2).ok());
}

}  // namespace
}  // namespace kvlane::core
