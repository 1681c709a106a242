// Plain text (core/plain_text.h): what a peer's name and quoted reasons may be.
#include "core/plain_text.h"

#include <gtest/gtest.h>

#include <string>

#include "kvlane/kvlane.h"

namespace kvlane::core {
namespace {

TEST(PlainText, UnicodeTextIsPlain) {
  EXPECT_TRUE(IsPlainText(""));
  EXPECT_TRUE(IsPlainText("decode-7 rank 1"));
  EXPECT_TRUE(
      IsPlainText("pr\xc3\xa4"
                  "fill"));                      // U+00E4
  EXPECT_TRUE(IsPlainText("\xe2\x82\xac"));      // U+20AC
  EXPECT_TRUE(IsPlainText("\xf0\x9f\x9a\x80"));  // U+1F680
  EXPECT_TRUE(IsPlainText("\xf4\x8f\xbf\xbf"));  // U+10FFFF
  EXPECT_TRUE(IsPlainText("\xc2\xa0"));          // U+00A0, just past C1
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
            "metadata: an agent name is UTF-8 text without control characters, got 'a?b'");
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

}  // namespace
}  // namespace kvlane::core
