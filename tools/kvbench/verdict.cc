#include "verdict.h"

namespace kvbench {

Verdict Combine(LocalCheck a, LocalCheck b) {
  if (a == LocalCheck::kFail || b == LocalCheck::kFail) return Verdict::kFail;
  if (a == LocalCheck::kPass || b == LocalCheck::kPass) return Verdict::kPass;
  return Verdict::kNoVerifier;
}

Verdict Worse(Verdict a, Verdict b) {
  if (a == Verdict::kFail || b == Verdict::kFail) return Verdict::kFail;
  if (a == Verdict::kNoVerifier || b == Verdict::kNoVerifier) return Verdict::kNoVerifier;
  return Verdict::kPass;
}

const char* LocalCheckName(LocalCheck c) {
  switch (c) {
    case LocalCheck::kNotVerifier:
      return "not-verifier";
    case LocalCheck::kPass:
      return "pass";
    case LocalCheck::kFail:
      return "fail";
  }
  return "fail";
}

const char* VerdictName(Verdict v) {
  switch (v) {
    case Verdict::kNoVerifier:
      return "no-verifier";
    case Verdict::kPass:
      return "pass";
    case Verdict::kFail:
      return "fail";
  }
  return "fail";
}

LocalCheck ParseLocalCheck(const std::string& name) {
  if (name == "pass") return LocalCheck::kPass;
  if (name == "not-verifier") return LocalCheck::kNotVerifier;
  return LocalCheck::kFail;
}

}  // namespace kvbench
