// End to end: `kvbench run` spawns two real rank processes on host memory with a
// tiny grid, writes valid documents, and `kvbench summarize` renders them.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

namespace {

namespace fs = std::filesystem;

// A fresh path under the temp directory; every one is removed when the test ends.
class Dirs {
 public:
  ~Dirs() {
    for (const fs::path& p : made_) fs::remove_all(p);
  }
  fs::path operator()(const std::string& name) {
    fs::path p = fs::temp_directory_path() / ("kvbench_e2e_" + name + std::to_string(getpid()));
    fs::remove_all(p);
    made_.push_back(p);
    return p;
  }

 private:
  std::vector<fs::path> made_;
};

int Kvbench(const std::string& args) {
  std::string cmd = std::string(KVBENCH_BINARY) + " " + args;
  int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

nlohmann::json OnlyDocument(const fs::path& dir) {
  std::vector<fs::path> docs;
  for (const auto& e : fs::directory_iterator(dir)) docs.push_back(e.path());
  EXPECT_EQ(docs.size(), 1u);
  if (docs.empty()) return {};
  std::ifstream in(docs[0]);
  return nlohmann::json::parse(in);
}

void ExpectValid(const nlohmann::json& doc, const std::string& transport, size_t rows) {
  EXPECT_TRUE(doc["version"].is_number_integer());
  EXPECT_EQ(doc["outcome"]["valid"], true) << doc["outcome"].dump();
  EXPECT_EQ(doc["implementation"]["transport"], transport);
  ASSERT_EQ(doc["rows"].size(), rows);
  for (const auto& row : doc["rows"]) {
    EXPECT_EQ(row["verified"], "pass") << row.dump();
    EXPECT_GT(row["gbps_p50"].get<double>(), 0);
    // Every measured burst's per-request offsets, one array per sample.
    ASSERT_EQ(row["request_ms"].size(), row["burst_ms"]["n"].get<size_t>());
    for (const auto& sample : row["request_ms"]) {
      EXPECT_EQ(sample.size(), row["batch"].get<size_t>());
    }
    const auto& p50 = row["request_ms"][row["p50_sample"].get<size_t>()];
    EXPECT_LE(*std::max_element(p50.begin(), p50.end()),
              row["burst_ms"]["p50"].get<double>() + 0.001);
  }
  EXPECT_EQ(doc["topology"]["ranks"].size(), 2u);
}

const char* kTiny =
    "--isl 8192 --batches 1,2 --warmup 1 --samples 3 --trials 1 "
    "--pool-budget 1GiB --control-timeout 60s";

TEST(KvbenchEndToEnd, ShmRunThenSummarize) {
  Dirs FreshDir;
  fs::path out = FreshDir("shm"), summary = FreshDir("shm_summary");
  ASSERT_EQ(Kvbench(std::string("run --transport shm ") + kTiny + " --out " + out.string()), 0);
  ExpectValid(OnlyDocument(out), "shm", 4);  // 2 batches x pull, push
  ASSERT_EQ(Kvbench("summarize " + out.string() + " --out " + summary.string()), 0)
      << "summarize failed (is gnuplot installed? .ci/run installs gnuplot-nox)";
  EXPECT_TRUE(fs::exists(summary / "summary.md"));
  EXPECT_TRUE(fs::exists(summary / "frontier.svg"));
  EXPECT_TRUE(fs::exists(summary / "latency_vs_isl.svg"));
}

TEST(KvbenchEndToEnd, TcpRunWithSocketReference) {
  Dirs FreshDir;
  fs::path out = FreshDir("tcp");
  ASSERT_EQ(Kvbench(std::string("run --transport tcp --ops pull,push ") + kTiny + " --out " +
                    out.string()),
            0);
  nlohmann::json doc = OnlyDocument(out);
  ExpectValid(doc, "tcp", 4);
  for (const auto& row : doc["rows"]) {  // push: initiator -> target; pull: the reverse
    EXPECT_EQ(row["reference"]["method"], "socket") << row["op"];
    EXPECT_GT(row["reference"]["gbps_p50"].get<double>(), 0) << row["op"];
  }
}

TEST(KvbenchEndToEnd, CorruptedByteFailsTheRunWithNonZeroExit) {
  Dirs FreshDir;
  fs::path out = FreshDir("fault");
  EXPECT_EQ(Kvbench(std::string("run --transport shm --inject-fault flip-byte ") + kTiny +
                    " --out " + out.string() + " > /dev/null 2>&1"),
            1);
  nlohmann::json doc = OnlyDocument(out);
  EXPECT_EQ(doc["outcome"]["valid"], false);
  ASSERT_EQ(doc["rows"].size(), 4u);
  for (const auto& row : doc["rows"]) {
    EXPECT_EQ(row["verified"], "fail");
    EXPECT_NE(row["verify_detail"].get<std::string>().find("1 mismatching"), std::string::npos)
        << row["verify_detail"];
  }
}

TEST(KvbenchEndToEnd, LocalTransportRunsInOneProcess) {
  Dirs FreshDir;
  fs::path out = FreshDir("local");
  ASSERT_EQ(Kvbench(std::string("run --transport local --ops push ") + kTiny + " --out " +
                    out.string() + " > /dev/null"),
            0);
  ExpectValid(OnlyDocument(out), "local", 2);
}

TEST(KvbenchEndToEnd, PlanJsonIsOneObject) {
  Dirs FreshDir;
  fs::path out = FreshDir("plan");
  fs::create_directories(out);
  ASSERT_EQ(Kvbench("plan --json > " + (out / "plan.json").string()), 0);
  std::ifstream in(out / "plan.json");
  nlohmann::json plan = nlohmann::json::parse(in);
  EXPECT_EQ(plan["groups"][0]["packed_bytes"], 1123200);
  EXPECT_TRUE(plan["layout"]["bytes"].is_number());
  EXPECT_EQ(Kvbench("plan --block 192 2>/dev/null"), 2);
}

}  // namespace
