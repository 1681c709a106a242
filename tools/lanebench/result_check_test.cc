#include "result_check.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

namespace lanebench {
namespace {

using nlohmann::json;

RunSpec Spec() {
  RunSpec s;
  s.iters = 3;
  return s;
}

json Good() {
  return {{"ok", true},
          {"iterations", 3},
          {"verified", 3},
          {"failed", 0},
          {"failed_iterations", json::array()},
          {"transport", "tcp"},
          {"lat_us", {{"small", {1.5, 2.0, 2.5}}, {"bulk", {9, 10, 11}}}},
          {"window_us", {3.0, 4.0, 5.0}},
          {"host_stalls", {{"spin_ms", 100}, {"over_5us", 2}}}};
}

std::string ErrorOf(const json& checked) {
  EXPECT_FALSE(checked.value("ok", true));
  return checked.value("error", std::string());
}

TEST(ResultCheck, AWellFormedResultIsTakenAsItIs) {
  EXPECT_EQ(CheckedResult(Good(), Spec()), Good());
  const json failed = {{"ok", false}, {"error", "target0: timeout"}, {"iterations", 3}};
  EXPECT_EQ(CheckedResult(failed, Spec()), failed);
}

// Each of these crashed the orchestrator with a JSON type error (every finished
// run lost, no document), or read as valid.
TEST(ResultCheck, AFieldOfAnotherTypeFailsTheRunInsteadOfThrowing) {
  const std::vector<std::pair<std::string, json>> odd = {{"ok", 1},
                                                         {"ok", "true"},
                                                         {"verified", "x"},
                                                         {"error", 5},
                                                         {"warning", json::array()},
                                                         {"iterations", 1.5},
                                                         {"lat_us", {{"small", {"x"}}}},
                                                         {"lat_us", json::array()},
                                                         {"host_stalls", 1},
                                                         {"host_stalls", {{"spin_ms", "1"}}},
                                                         {"failed_iterations", {1, "2"}},
                                                         {"window_us", {{"a", 1}}}};
  for (const auto& [key, value] : odd) {
    json r = Good();
    r[key] = value;
    const json checked = CheckedResult(r, Spec());
    EXPECT_NE(ErrorOf(checked).find("malformed"), std::string::npos) << key << " " << value.dump();
  }
  for (const json& not_object : {json::array(), json(7), json("ok")})
    EXPECT_NE(ErrorOf(CheckedResult(not_object, Spec())).find("not an object"), std::string::npos);
}

// {"ok": true, "iterations": 0, "verified": 0} counted as a valid run with no samples.
TEST(ResultCheck, AnOkResultMustCountTheSpecsIterations) {
  for (const auto& [key, value] :
       std::vector<std::pair<std::string, json>>{{"iterations", 0},
                                                 {"verified", 2},
                                                 {"lat_us", {{"small", {1.0}}}},
                                                 {"lat_us", json::object()}}) {
    json r = Good();
    r[key] = value;
    EXPECT_NE(ErrorOf(CheckedResult(r, Spec())), "") << key << " " << value.dump();
  }
}

// A result the source wrote as ok but CheckedResult refuses: the source exited 0 as
// it should, which read as "a process did not exit cleanly after the result".
TEST(ResultCheck, TheSourcesExitCodeIsExpectedFromTheResultAsWritten) {
  json malformed = Good();
  malformed["iterations"] = 2;  // refused below, but written as ok
  ASSERT_FALSE(CheckedResult(malformed, Spec()).value("ok", true));
  EXPECT_EQ(ExpectedSourceExit(malformed), 0);
  EXPECT_EQ(ExpectedSourceExit(Good()), 0);
  EXPECT_EQ(ExpectedSourceExit(json{{"ok", false}, {"error", "x"}}), 1);
  for (const json& odd : {json::array(), json{{"ok", "true"}}, json::object()})
    EXPECT_EQ(ExpectedSourceExit(odd), 1) << odd.dump();
}

TEST(ResultCheck, PeerTextIsCutAndPrintable) {
  json r = Good();
  r["ok"] = false;
  r["first_failure"] = "\x1b[2J" + std::string(5000, 'x');
  const json checked = CheckedResult(r, Spec());
  const std::string text = checked["first_failure"].get<std::string>();
  EXPECT_EQ(text.substr(0, 4), "?[2J");
  EXPECT_EQ(text.size(), 512u + 3);
}

// A result file nested deeper than lanebench writes is refused before parsing
// (nlohmann's copy and dump of it recurse), not parsed and copied.
TEST(ResultCheck, AFileNestedTooDeeplyIsRefused) {
  const std::string path = "/tmp/lanebench-deep-" + std::to_string(getpid()) + ".json";
  {
    std::ofstream out(path);
    out << R"({"ok":false,"e":)" << std::string(100000, '[') << std::string(100000, ']') << "}";
  }
  const auto read = ReadJsonFile(path);
  std::remove(path.c_str());
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.status().message().find("nested too deeply"), std::string::npos);
}

}  // namespace
}  // namespace lanebench
