#include "verdict.h"

#include <gtest/gtest.h>

namespace kvbench {
namespace {

constexpr LocalCheck kAll[] = {LocalCheck::kNotVerifier, LocalCheck::kPass, LocalCheck::kFail};

TEST(Verdict, CombinationRules) {
  EXPECT_EQ(Combine(LocalCheck::kPass, LocalCheck::kNotVerifier), Verdict::kPass);
  EXPECT_EQ(Combine(LocalCheck::kPass, LocalCheck::kPass), Verdict::kPass);
  EXPECT_EQ(Combine(LocalCheck::kFail, LocalCheck::kPass), Verdict::kFail);
  EXPECT_EQ(Combine(LocalCheck::kFail, LocalCheck::kNotVerifier), Verdict::kFail);
}

TEST(Verdict, NoVerifyingSideIsNotAPass) {
  Verdict v = Combine(LocalCheck::kNotVerifier, LocalCheck::kNotVerifier);
  EXPECT_EQ(v, Verdict::kNoVerifier);
  EXPECT_STREQ(VerdictName(v), "no-verifier");
}

TEST(Verdict, BothRanksAgree) {
  for (LocalCheck a : kAll) {
    for (LocalCheck b : kAll) EXPECT_EQ(Combine(a, b), Combine(b, a));
  }
}

TEST(Verdict, NamesRoundTripAndUnknownFailsClosed) {
  for (LocalCheck c : kAll) EXPECT_EQ(ParseLocalCheck(LocalCheckName(c)), c);
  EXPECT_EQ(ParseLocalCheck("garbage"), LocalCheck::kFail);
  EXPECT_EQ(ParseLocalCheck(""), LocalCheck::kFail);
}

}  // namespace
}  // namespace kvbench
