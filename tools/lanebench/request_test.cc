#include "request.h"

#include <gtest/gtest.h>

#include <string>

namespace lanebench {
namespace {

TEST(TargetRequest, APlainRequestInsideTheBufferIsTaken) {
  auto r = ParseRequest("fill 7 2 4096 64", 8192);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->cmd, "fill");
  EXPECT_EQ(r->epoch, 7u);
  EXPECT_EQ(r->src, 2u);
  EXPECT_EQ(r->off, 4096u);
  EXPECT_EQ(r->len, 64u);
  EXPECT_TRUE(ParseRequest("verify 0 0 0 8192", 8192).ok()) << "the whole buffer";
  EXPECT_TRUE(ParseRequest("flip 1 0 8184 8", 8192).ok()) << "its last 8 bytes";
}

// An offset near 2^64 made off + len wrap past the check: a fill wrote before the
// buffer, a verify copied ~2^64 bytes; "-8" read as 2^64 - 8.
TEST(TargetRequest, ARangeOutsideTheBufferIsRefusedWithoutWrapping) {
  for (const char* bad :
       {"fill 1 0 18446744073709551608 16", "verify 1 0 1 18446744073709551615", "flip 1 0 -8 16",
        "fill 1 0 8180 16", "fill 1 0 0 8193", "fill 1 0 0 7", "fill 1 0 8192 8"}) {
    const auto r = ParseRequest(bad, 8192);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), kvlane::Code::kInvalidArgument);
  }
}

TEST(TargetRequest, AnythingButFivePlainNumbersIsRefusedQuotingNothing) {
  for (const char* bad :
       {"", "fill", "fill 1 0 0", "fill 1 0 0 64 extra", "fill  1 0 0 64", "fill 1 0 0 64 ",
        "FILL 1 0 0 64", "quit 1 0 0 64", "fill x 0 0 64", "fill 1 4294967296 0 64",
        "fill 1 0 0x10 64", "fill 1 0 +1 64", "fill 1 0 1e3 64", "fill 99999999999999999999 0 0 64",
        "fill 1 0 0 64\n", "fill\t1 0 0 64"}) {
    const auto r = ParseRequest(bad, 8192);
    ASSERT_FALSE(r.ok()) << "'" << bad << "'";
    EXPECT_EQ(r.status().message().find(bad[0] != '\0' ? bad : "\x01"), std::string::npos)
        << "peer text in the error";
  }
}

}  // namespace
}  // namespace lanebench
