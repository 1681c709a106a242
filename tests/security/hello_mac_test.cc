// The handshake's MAC (transport/stream/hello_mac.h): HMAC-SHA256 against the
// RFC 4231 test vectors, and the two proofs against values computed
// independently (Python's hmac) from the layout the header documents, so that
// a change of that layout (a wire change) fails here.
#include "transport/stream/hello_mac.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>

namespace kvlane::core {
namespace {

std::span<const uint8_t> Bytes(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

std::string Hex(const Mac& m) {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  for (uint8_t b : m) {
    out += kDigits[b >> 4];
    out += kDigits[b & 15];
  }
  return out;
}

TEST(HelloMac, MatchesRfc4231TestCase1) {
  const std::string key(20, '\x0b');
  EXPECT_EQ(Hex(HmacSha256(Bytes(key), {Bytes("Hi There")})),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
}

TEST(HelloMac, MatchesRfc4231TestCase2InOneOrSeveralParts) {
  const char* want = "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843";
  EXPECT_EQ(Hex(HmacSha256(Bytes("Jefe"), {Bytes("what do ya want for nothing?")})), want);
  EXPECT_EQ(
      Hex(HmacSha256(Bytes("Jefe"), {Bytes("what do ya "), Bytes(""), Bytes("want for nothing?")})),
      want);
}

TEST(HelloMac, MatchesRfc4231TestCase6KeyLongerThanABlock) {
  const std::string key(131, '\xaa');
  EXPECT_EQ(Hex(HmacSha256(Bytes(key),
                           {Bytes("Test Using Larger Than Block-Size Key - Hash Key First")})),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

struct Inputs {
  Secret secret{};
  Nonce server{}, client{};
  Inputs() {
    for (size_t i = 0; i < secret.size(); ++i) secret[i] = static_cast<uint8_t>(i);
    server.fill(0x11);
    client.fill(0x22);
  }
};

TEST(HelloMac, ProofsFollowTheDocumentedLayout) {
  Inputs in;
  EXPECT_EQ(Hex(HelloProof(in.secret, in.server, in.client, 0x0102030405060708ull, 2, "abc")),
            "de4279b962f2e0d325b8f45c29c9d41905a50225ace67b7a4b31d406793f69db");
  EXPECT_EQ(Hex(ReadyProof(in.secret, in.client, in.server, 0x0102030405060708ull)),
            "f356090fa16f51dba22d100b9beb4a296585dd7734c2c6e77143952f3df45df3");
}

TEST(HelloMac, ProofsDependOnEveryInput) {
  Inputs in;
  const Mac base = HelloProof(in.secret, in.server, in.client, 7, 2, "abc");
  Secret secret = in.secret;
  secret[15] ^= 1;
  Nonce server = in.server;
  server[0] ^= 1;
  EXPECT_FALSE(MacEquals(base, HelloProof(secret, in.server, in.client, 7, 2, "abc")));
  EXPECT_FALSE(MacEquals(base, HelloProof(in.secret, server, in.client, 7, 2, "abc")));
  EXPECT_FALSE(
      MacEquals(base, HelloProof(in.secret, in.client, in.server, 7, 2, "abc")));  // nonces swapped
  EXPECT_FALSE(MacEquals(base, HelloProof(in.secret, in.server, in.client, 8, 2, "abc")));
  EXPECT_FALSE(MacEquals(base, HelloProof(in.secret, in.server, in.client, 7, 1, "abc")));
  EXPECT_FALSE(MacEquals(base, HelloProof(in.secret, in.server, in.client, 7, 2, "abd")));
  EXPECT_TRUE(MacEquals(base, HelloProof(in.secret, in.server, in.client, 7, 2, "abc")));
  // The target's proof is never the initiator's, whatever the nonces.
  EXPECT_FALSE(MacEquals(ReadyProof(in.secret, in.server, in.client, 7),
                         HelloProof(in.secret, in.server, in.client, 7, 2, "")));
}

TEST(HelloMac, MacEqualsComparesEveryByte) {
  Mac a{};
  a.fill(0x33);
  for (size_t i = 0; i < a.size(); ++i) {
    Mac b = a;
    b[i] ^= 0x40;
    EXPECT_FALSE(MacEquals(a, b)) << i;
  }
  EXPECT_TRUE(MacEquals(a, a));
}

}  // namespace
}  // namespace kvlane::core
