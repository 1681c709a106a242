// Plain text (core/plain_text.h): what a peer's name and quoted reasons may be.
#include "core/plain_text.h"

#include <gtest/gtest.h>

#include <string>

#include "core/metadata.h"
#include "kvlane/kvlane.h"
#include "transport/stream/frame_check.h"
#include "transport/stream/hello_mac.h"

namespace kvlane::core {
namespace {

TEST(PlainText, UnicodeTextIsPlain) {
  EXPECT_TRUE(IsPlainText(""));
  EXPECT_TRUE(IsPlainText("decode-7 rank 1"));
  EXPECT_TRUE(
      IsPlainText("pr\xc3\xa4"
                  "fill"));                              // U+00E4
  EXPECT_TRUE(IsPlainText("\xe2\x82\xac"));              // U+20AC
  EXPECT_TRUE(IsPlainText("\xf0\x9f\x9a\x80"));          // U+1F680
  EXPECT_TRUE(IsPlainText("\xf4\x8f\xbf\xbf"));          // U+10FFFF
  EXPECT_TRUE(IsPlainText("\xc2\xa0"));                  // U+00A0, just past C1
  EXPECT_TRUE(IsPlainText("\xe2\x80\xa7\xe2\x80\xaf"));  // U+2027, U+202F: beside the bidi ones
  EXPECT_TRUE(IsPlainText("\xe2\x81\xa5\xe2\x81\xaa"));  // U+2065, U+206A
}

TEST(PlainText, ControlsAndMalformedUtf8AreNot) {
  const std::string bad[] = {
      std::string("a\0b", 3),
      "tab\there",
      "new\nline",
      "\x1b[2J",
      "del\x7f",
      "\xc2\x80",
      "\xc2\x9f",  // C1 controls
      "\xff",
      "\xfe\xff",
      "\x80",
      "abc\xbf",  // not UTF-8 at all, stray continuations
      "\xc0\xaf",
      "\xc1\xbf",
      "\xe0\x80\xaf",      // overlong forms
      "\xf0\x80\x80\xaf",  // overlong four-byte form
      "\xed\xa0\x80",      // a surrogate (U+D800)
      "\xf4\x90\x80\x80",
      "\xf5\x80\x80\x80",  // past U+10FFFF
      "\xe2\x82",
      "\xf0\x9f\x9a",  // truncated at the end
      "\xe2\x28\xa1",  // a continuation that is not one
      "\xe2\x80\xa8",
      "\xe2\x80\xa9",  // line, paragraph separator
      "a\xe2\x80\xae"
      "b",
      "\xe2\x80\xaa",  // bidi override, embedding
      "\xe2\x81\xa6",
      "\xe2\x81\xa9",  // bidi isolates
  };
  for (const std::string& s : bad) EXPECT_FALSE(IsPlainText(s)) << PlainTextOf(s);
}

TEST(PlainText, PlainTextOfReplacesEachBadByteOnly) {
  EXPECT_EQ(PlainTextOf("ok \xc3\xa4"), "ok \xc3\xa4");
  EXPECT_EQ(PlainTextOf("a\nb"), "a?b");
  EXPECT_EQ(PlainTextOf("\xff\xfe"
                        "x"),
            "??x");
  EXPECT_EQ(PlainTextOf("\xe2\x82"), "??");  // truncated: each byte on its own
  EXPECT_TRUE(IsPlainText(PlainTextOf("\x1b[2J\xed\xa0\x80\xc0\xaf")));
}

TEST(PlainText, AgentNamesAreOneTo255BytesOfPlainText) {
  EXPECT_TRUE(CheckAgentName("prefill-0", "test").ok());
  EXPECT_TRUE(CheckAgentName(std::string(255, 'n'), "test").ok());
  EXPECT_EQ(CheckAgentName("", "test").code(), Code::kInvalidArgument);
  EXPECT_EQ(CheckAgentName(std::string(256, 'n'), "test").code(), Code::kInvalidArgument);
  const Status bad = CheckAgentName(
      "a\xff"
      "b",
      "metadata");
  EXPECT_EQ(bad.code(), Code::kInvalidArgument);
  EXPECT_EQ(bad.message(),
            "metadata: an agent name is UTF-8 text without control or bidi characters, got 'a?b'");
}

// An agent of this process is held to the same rule as its peers: a name
// that is not plain text is refused at Create, naming the option.
TEST(PlainText, AgentCreateRefusesANameThatIsNotPlainText) {
  AgentOptions o;
  o.name = "bad\xc3";
  o.transports = {"local"};
  auto a = Agent::Create(o);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), Code::kInvalidArgument);
  EXPECT_NE(a.status().message().find("AgentOptions.name"), std::string::npos)
      << a.status().ToString();
}

// The implicit directional marks: invisible, and they reorder the text
// around them as the explicit controls do.
const std::string kMarks[] = {
    "a\xe2\x80\x8e"
    "b",  // U+200E LEFT-TO-RIGHT MARK
    "a\xe2\x80\x8f"
    "b",  // U+200F RIGHT-TO-LEFT MARK
    "a\xd8\x9c"
    "b",  // U+061C ARABIC LETTER MARK
};
const std::string kCafe = "caf\xc3\xa9";  // U+00E9: plain non-ASCII text

TEST(PlainText, DirectionalMarksAreNot) {
  for (const std::string& s : kMarks) {
    EXPECT_FALSE(IsPlainText(s)) << PlainTextOf(s);
    EXPECT_EQ(CheckAgentName(s, "test").code(), Code::kInvalidArgument) << PlainTextOf(s);
  }
  EXPECT_EQ(PlainTextOf(kMarks[0]), "a???b");  // each byte of the mark
  EXPECT_EQ(PlainTextOf(kMarks[2]), "a??b");
  // Their neighbours stay plain.
  EXPECT_TRUE(IsPlainText("\xe2\x80\x8d\xe2\x80\x90"));  // U+200D, U+2010
  EXPECT_TRUE(IsPlainText("\xd8\x9b\xd8\x9d"));          // U+061B, U+061D
  EXPECT_TRUE(IsPlainText(kCafe));
  EXPECT_TRUE(CheckAgentName(kCafe, "test").ok());
}

// Every caller of the check refuses them: the agent's own options, a loaded
// blob (its name and its other text), and a Hello's name.
TEST(PlainText, DirectionalMarksAreRefusedWhereverNamesAreChecked) {
  AgentOptions o;
  o.transports = {"local"};
  for (const std::string& s : kMarks) {
    o.name = s;
    EXPECT_EQ(o.Validate().code(), Code::kInvalidArgument) << PlainTextOf(s);
    auto a = Agent::Create(o);
    EXPECT_EQ(a.status().code(), Code::kInvalidArgument) << PlainTextOf(s);
  }
  o.name = kCafe;
  EXPECT_TRUE(o.Validate().ok());
  EXPECT_TRUE(Agent::Create(o).ok());

  AgentMeta m;
  m.name = "target";
  m.agent_id = 7;
  ASSERT_TRUE(DecodeMeta(EncodeMeta(m)).ok());
  for (const std::string& s : kMarks) {
    AgentMeta named = m, hosted = m;
    named.name = s;
    hosted.hostname = s;
    EXPECT_EQ(DecodeMeta(EncodeMeta(named)).status().code(), Code::kInvalidArgument);
    EXPECT_EQ(DecodeMeta(EncodeMeta(hosted)).status().code(), Code::kInvalidArgument);
  }
  m.name = kCafe;
  EXPECT_TRUE(DecodeMeta(EncodeMeta(m)).ok());

  Secret secret{};
  secret.fill(3);
  Nonce server{}, client{};
  server.fill(0x11);
  client.fill(0x5c);
  const auto hello = [&](const std::string& name) {
    StreamHello h{};
    h.magic = kHelloMagic;
    h.version = kWireVersion;
    h.name_len = static_cast<uint8_t>(name.size());
    h.target_id = 42;
    h.nonce = client;
    h.proof = HelloProof(secret, server, client, 42, kWireVersion, name);
    return CheckHello(h, name, 42, secret, server);
  };
  for (const std::string& s : kMarks) EXPECT_EQ(hello(s).code(), Code::kNotAllowed);
  EXPECT_TRUE(hello(kCafe).ok());
}

}  // namespace
}  // namespace kvlane::core
