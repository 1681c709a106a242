#include "common/sanitizer_reports.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace kvlane_tools {
namespace {

namespace fs = std::filesystem;

// The directory the started processes write their reports to ("report.<pid>").
fs::path& ReportDir() {
  static fs::path dir;
  return dir;
}

// Appends log_path=<dir>/report to each sanitizer's options; a later value wins
// over one the environment already had (the CI's options stay otherwise).
void SendReportsTo(const fs::path& dir) {
  for (const char* var : {"ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS", "TSAN_OPTIONS"}) {
    const char* old = getenv(var);
    std::string value = old != nullptr && *old != '\0' ? std::string(old) + ":" : "";
    setenv(var, (value + "log_path=" + (dir / "report").string()).c_str(), 1);
  }
}

// Fails the current test (or the program, between tests) once per report written
// since the last look, with the report; removes each.
void FailOnReports() {
  if (ReportDir().empty()) return;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(ReportDir(), ec)) {
    std::ifstream in(e.path());
    ADD_FAILURE() << "sanitizer report of a process started by this test ("
                  << e.path().filename().string() << "):\n"
                  << std::string(std::istreambuf_iterator<char>(in), {});
    fs::remove(e.path(), ec);
  }
}

// Created before the first test and removed after the last one, so that listing
// the tests (gtest_discover_tests) leaves nothing behind.
class ReportDirectory : public ::testing::Environment {
 public:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "kvlane_tool_sanitizer_XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr) << "cannot make a directory for sanitizer reports";
    ReportDir() = tmpl;
    SendReportsTo(ReportDir());
  }
  void TearDown() override {  // processes that outlived their test: the program fails
    FailOnReports();
    std::error_code ec;
    fs::remove_all(ReportDir(), ec);
  }
};

// Attributes a report to the test during which it was written.
class PerTest : public ::testing::EmptyTestEventListener {
  void OnTestEnd(const ::testing::TestInfo&) override { FailOnReports(); }
};

}  // namespace

bool WatchChildSanitizerReports() {
#ifdef KVLANE_TOOLS_SANITIZED  // tools/CMakeLists.txt: a build with KVLANE_ASAN or KVLANE_TSAN
  static const bool registered = [] {
    ::testing::AddGlobalTestEnvironment(new ReportDirectory);
    ::testing::UnitTest::GetInstance()->listeners().Append(new PerTest);
    return true;
  }();
  return registered;
#else
  return false;
#endif
}

}  // namespace kvlane_tools
