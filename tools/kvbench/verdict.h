// Verdicts: what each rank saw of a row's landed bytes, and the one verdict both
// ranks agree on. Pure values and functions.
#pragma once

#include <string>

namespace kvbench {

// One rank's own check of a row.
enum class LocalCheck {
  kNotVerifier = 0,  // nothing landed on this rank (or it cannot check)
  kPass = 1,         // every landed byte matched
  kFail = 2,         // a mismatch, or the transfer failed
};

// The row's verdict.
enum class Verdict {
  kNoVerifier = 0,  // no rank checked the bytes: never counted as passed
  kPass = 1,
  kFail = 2,
};

// Fail if either side failed; else pass if at least one side checked; else
// no-verifier. Symmetric, so both ranks compute the same verdict.
Verdict Combine(LocalCheck a, LocalCheck b);
// A row checked twice: fail if either check failed; else no-verifier if either
// had none; else pass.
Verdict Worse(Verdict a, Verdict b);

const char* LocalCheckName(LocalCheck c);
const char* VerdictName(Verdict v);  // "pass", "fail", "no-verifier"
// Parses LocalCheckName's output; anything else reads as kFail (fail closed).
LocalCheck ParseLocalCheck(const std::string& name);

}  // namespace kvbench
