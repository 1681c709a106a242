// End to end: `kvbench run` spawns two real rank processes on host memory with a
// tiny grid, writes valid documents, and `kvbench summarize` renders them. Stopping
// a run by a signal: e2e_stop_test.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/sanitizer_reports.h"  // a rank's report fails the test
#include "host_memory.h"
#include "kvbench_process.h"
#include "kvlane/agent.h"

namespace {

namespace fs = std::filesystem;
using kvbench::testing::Dirs;
using kvbench::testing::ExpectValid;
using kvbench::testing::FreeLoopbackPeer;
using kvbench::testing::OnlyDocument;
using kvbench::testing::ReadFile;

int Kvbench(const std::string& args) { return kvbench::testing::RunBinary(KVBENCH_BINARY, args); }

const char* kTiny =
    "--isl 8192 --batches 1,2 --warmup 1 --samples 3 --trials 1 "
    "--pool-budget 1GiB --control-timeout 60s";

TEST(KvbenchEndToEnd, ShmRunThenSummarize) {
  Dirs FreshDir;
  fs::path out = FreshDir("shm"), summary = FreshDir("shm_summary");
  ASSERT_EQ(Kvbench(std::string("run --transport shm ") + kTiny + " --out " + out.string()), 0);
  const nlohmann::json doc = OnlyDocument(out);
  ExpectValid(doc, "shm", 4);            // 2 batches x pull, push
  for (const auto& row : doc["rows"]) {  // checked before and in the timed bursts
    const std::string detail = row["verify_detail"].get<std::string>();
    const size_t last = detail.find("last timed burst: ");
    ASSERT_NE(last, std::string::npos) << detail;
    EXPECT_NE(detail.find(" 0 mismatching", last), std::string::npos) << detail;
  }
  // Both ranks' builds, one and the same here.
  const nlohmann::json& ranks = doc["topology"]["ranks"];
  ASSERT_EQ(ranks.size(), 2u);
  EXPECT_EQ(ranks[0].value("version", ""), kvlane::VersionString());
  EXPECT_EQ(ranks[1].value("version", ""), kvlane::VersionString());
  ASSERT_EQ(Kvbench("summarize " + out.string() + " --out " + summary.string()), 0)
      << "summarize failed (is gnuplot installed? .ci/run installs gnuplot-nox)";
  EXPECT_TRUE(fs::exists(summary / "summary.md"));
  EXPECT_TRUE(fs::exists(summary / "frontier.svg"));
  EXPECT_TRUE(fs::exists(summary / "latency_vs_isl.svg"));
  // Exit codes (README): 3 a chart not rendered (no gnuplot on PATH), summary.md
  // still written; 4 nothing to summarize; 2 an input that does not exist.
  fs::remove_all(summary);
  EXPECT_EQ(kvbench::testing::RunBinary(
                "PATH=/nonexistent " KVBENCH_BINARY,
                "summarize " + out.string() + " --out " + summary.string() + " 2>/dev/null"),
            3);
  EXPECT_TRUE(fs::exists(summary / "summary.md"));
  EXPECT_EQ(
      Kvbench("summarize " + summary.string() + " --out " + summary.string() + " 2>/dev/null"),
      4);  // summary.md is no case document
  EXPECT_EQ(Kvbench("summarize " + (out / "missing").string() + " --out " + summary.string() +
                    " 2>/dev/null"),
            2);
}

TEST(KvbenchEndToEnd, TcpRunWithSocketReference) {
  Dirs FreshDir;
  fs::path out = FreshDir("tcp"), table = FreshDir("tcp_table"), err = FreshDir("tcp_err");
  // --staging-copy on host pools: nothing stages, so nothing changes, and it says so.
  ASSERT_EQ(
      Kvbench(std::string("run --transport tcp --ops pull,push --staging-copy kernel ") + kTiny +
              " --out " + out.string() + " > " + table.string() + " 2> " + err.string()),
      0);
  nlohmann::json doc = OnlyDocument(out);
  ExpectValid(doc, "tcp", 4);
  EXPECT_EQ(doc["implementation"]["memory"], "host");  // --memory auto: host for tcp
  EXPECT_EQ(doc["implementation"]["memory_declared"], "auto");
  EXPECT_EQ(doc["implementation"]["staging"], "none");
  EXPECT_EQ(doc["implementation"]["staging_copy"], "none");
  // The spawned ranks proved the launcher's fresh secret to each other.
  EXPECT_EQ(doc["implementation"]["control_auth"], "shared secret");
  EXPECT_NE(ReadFile(err).find("--staging-copy kernel: no rank stages"), std::string::npos)
      << ReadFile(err);
  EXPECT_EQ(doc["identity"]["case"], "kv-dsv4-b256-tcp-isl8k-b1_2");  // kTiny's ladders
  std::ifstream printed(table);
  std::string title;
  while (title.find("kvbench ") != 0 && std::getline(printed, title)) {
  }
  EXPECT_NE(title.find("transport tcp  memory host"), std::string::npos) << title;
  for (const auto& row : doc["rows"]) {  // push: initiator -> target; pull: the reverse
    EXPECT_EQ(row["reference"]["method"], "socket") << row["op"];
    EXPECT_GT(row["reference"]["gbps_p50"].get<double>(), 0) << row["op"];
  }
}

// Runs rank 0 (`common` + `target_flags`) in the background and rank 1 (`common`
// + `initiator_flags`) beside it, each started by hand; returns 16 x the
// target's exit code + the initiator's.
int RunHandStarted(const std::string& common, const std::string& target_flags,
                   const std::string& initiator_flags) {
  const std::string bin = std::string(KVBENCH_BINARY) + " " + common;
  const std::string both = bin + " --rank 0 " + target_flags + " >/dev/null 2>&1 & t=$!; " + bin +
                           " --rank 1 " + initiator_flags +
                           " >/dev/null 2>&1; i=$?; wait $t; exit $(( $? * 16 + i ))";
  return kvbench::testing::RunBinary("sh -c", "'" + both + "'");
}

// Hand-started ranks over shm, one row of `op`, with `--inject-fault flip-byte` on
// the target (`on_target`) or the initiator: both ranks exit 1 and the document is
// invalid.
void ExpectBothExitInvalid(const std::string& name, const std::string& op, bool on_target) {
  Dirs FreshDir;
  fs::path out = FreshDir(name), target_out = FreshDir(name + "_target");
  const std::string common =
      "run --transport shm --isl 8192 --batches 1 --ops " + op +
      " --pool-budget 1GiB --warmup 0 --samples 2 --trials 1 --control-timeout 30s --peer " +
      FreeLoopbackPeer();
  const std::string fault = "--inject-fault flip-byte ";
  EXPECT_EQ(RunHandStarted(common, (on_target ? fault : "") + "--out " + target_out.string(),
                           (on_target ? "" : fault) + "--out " + out.string()),
            16 * 1 + 1);
  EXPECT_EQ(OnlyDocument(out)["outcome"]["valid"], false);
}

// The target corrupting a byte pushed to it: both ranks exit 1 (invalid), the
// target too (it used to exit 0 whatever the verdict).
TEST(KvbenchEndToEnd, HandStartedTargetExitsInvalidWithTheRun) {
  ExpectBothExitInvalid("hand_fault", "push", true);
}

// The initiator corrupting a byte it pulled: only the initiator sees the mismatch,
// and the target exits 1 by the verdict "done" carries.
TEST(KvbenchEndToEnd, HandStartedTargetExitsInvalidByTheInitiatorsVerdict) {
  ExpectBothExitInvalid("hand_pull_fault", "pull", false);
}

// The rows of a tiny shm run with `--inject-fault fault`, which must exit 1 with an
// invalid document of all 4 rows (empty when it did not).
nlohmann::json RowsOfAFaultedRun(const std::string& fault) {
  Dirs FreshDir;
  fs::path out = FreshDir(fault);
  EXPECT_EQ(Kvbench("run --transport shm --inject-fault " + fault + " " + kTiny + " --out " +
                    out.string() + " > /dev/null 2>&1"),
            1);
  nlohmann::json doc = OnlyDocument(out);
  EXPECT_EQ(doc["outcome"]["valid"], false);
  EXPECT_EQ(doc["rows"].size(), 4u);
  return doc["rows"].size() == 4u ? doc["rows"] : nlohmann::json::array();
}

TEST(KvbenchEndToEnd, CorruptedByteFailsTheRunWithNonZeroExit) {
  for (const auto& row : RowsOfAFaultedRun("flip-byte")) {
    EXPECT_EQ(row["verified"], "fail");
    EXPECT_NE(row["verify_detail"].get<std::string>().find("1 mismatching"), std::string::npos)
        << row["verify_detail"];
  }
}

// The last timed burst of each row is checked against a pattern of its own: sources
// left as the row's first burst had them (bytes that moved, but stale) fail every
// row, for pull (the initiator checks) and push (the target does), though the first
// check passed.
TEST(KvbenchEndToEnd, StaleBytesInTheLastTimedBurstFailTheRun) {
  for (const auto& row : RowsOfAFaultedRun("stale-last-burst")) {
    EXPECT_EQ(row["verified"], "fail");
    const std::string detail = row["verify_detail"].get<std::string>();
    const size_t last = detail.find("last timed burst: ");
    ASSERT_NE(last, std::string::npos) << detail;
    EXPECT_NE(detail.find(" 0 mismatching"), std::string::npos) << "the first check: " << detail;
    EXPECT_EQ(detail.find(" 0 mismatching", last), std::string::npos) << detail;
    EXPECT_NE(detail.find("mismatching", last), std::string::npos) << detail;
  }
}

// Refused while reading the flags (cmd_run.cc prints "kvbench run: <why>"): no rank
// is spawned, no document is written.
TEST(KvbenchEndToEnd, DevicePoolOverAHostOnlyTransportIsRefused) {
  Dirs FreshDir;
  fs::path out = FreshDir("refused"), err = FreshDir("refused_stderr");
  for (const char* flags :
       {"--transport shm --memory cuda", "--transport local --memory cuda",
        "--transport cuda --memory host", "--transport shm --memory cuda,host",
        "--transport local --memory host,cuda", "--transport cuda --memory cuda,host",
        "--transport cuda --memory host,cuda"}) {
    EXPECT_EQ(Kvbench(std::string("run ") + flags + " " + kTiny + " --out " + out.string() + " 2>" +
                      err.string()),
              2)
        << flags;
    EXPECT_FALSE(fs::exists(out)) << flags;
    const std::string said = ReadFile(err);
    EXPECT_EQ(said.rfind("kvbench run: --memory ", 0), 0u) << flags << ": " << said;
    EXPECT_EQ(said.find("kvbench rank"), std::string::npos) << flags << ": " << said;
  }
}

// An --out that cannot hold the document (here below a regular file) is refused
// before any rank starts, not after the whole grid was measured.
TEST(KvbenchEndToEnd, UnwritableOutIsRefusedBeforeTheRun) {
  Dirs FreshDir;
  fs::path dir = FreshDir("unwritable"), err = FreshDir("unwritable_stderr");
  fs::create_directories(dir);
  std::ofstream(dir / "file") << "x";
  EXPECT_EQ(Kvbench(std::string("run --transport shm ") + kTiny + " --out " +
                    (dir / "file" / "sub").string() + " > /dev/null 2>" + err.string()),
            2);
  const std::string said = ReadFile(err);
  EXPECT_EQ(said.rfind("kvbench run: --out ", 0), 0u) << said;
  EXPECT_EQ(said.find("kvbench rank"), std::string::npos) << said;
}

// A mixed pair with no GPU visible (CUDA_VISIBLE_DEVICES empty, so also on a GPU
// host): the rank whose pool would be on a GPU stops with NotSupported's message,
// its peer with "peer reported:", before either sizes a pool; no document. With
// transport auto the pair resolves to tcp.
TEST(KvbenchEndToEnd, MixedPairWithoutAGpuStopsTheDeviceSide) {
  Dirs FreshDir;
  fs::path out = FreshDir("mixed"), err = FreshDir("mixed_stderr");
  for (const char* flags : {"--transport tcp --memory cuda,host", "--memory host,cuda"}) {
    EXPECT_EQ(kvbench::testing::RunBinary(std::string("CUDA_VISIBLE_DEVICES= ") + KVBENCH_BINARY,
                                          std::string("run ") + flags + " " + kTiny + " --out " +
                                              out.string() + " 2>" + err.string()),
              2)
        << flags;
    EXPECT_FALSE(fs::exists(out)) << flags;
    const std::string said = ReadFile(err);
    const bool target_on_gpu = std::string(flags).find("cuda,host") != std::string::npos;
    const std::string device_rank = target_on_gpu ? "kvbench rank 0: " : "kvbench rank 1: ";
    const std::string host_rank = target_on_gpu ? "kvbench rank 1: " : "kvbench rank 0: ";
    EXPECT_NE(said.find(device_rank + "--memory "), std::string::npos) << flags << ": " << said;
    EXPECT_NE(
        said.find("(over tcp) puts the " + std::string(target_on_gpu ? "target" : "initiator") +
                  "'s pool, this rank's, on a GPU: no CUDA device visible to kvbench"),
        std::string::npos)
        << flags << ": " << said;
    EXPECT_NE(said.find(host_rank + "peer reported: --memory "), std::string::npos)
        << flags << ": " << said;
  }
}

// A socket reference that fails stops both ranks at once (well inside the control
// timeout) and the run says why: `fault` fails one rank's reference before its
// first byte (setup) or partway through the bytes (stream).
struct ReferenceFailure {
  const char* fault;
  const char* ops;
  const char* reason;  // in the initiator's run-level error
};

void PrintTo(const ReferenceFailure& f, std::ostream* os) { *os << f.fault << " " << f.ops; }

class KvbenchReferenceFailure : public ::testing::TestWithParam<ReferenceFailure> {};

TEST_P(KvbenchReferenceFailure, StopsBothRanksAtOnceWithTheReason) {
  const ReferenceFailure& f = GetParam();
  Dirs FreshDir;
  fs::path out = FreshDir("ref_fault"), err = FreshDir("ref_fault_stderr");
  const auto t0 = std::chrono::steady_clock::now();
  int code = Kvbench(std::string("run --transport tcp --isl 8192 --batches 1 --warmup 1 ") +
                     "--samples 3 --trials 1 --pool-budget 1GiB --control-timeout 60s --ops " +
                     f.ops + " --inject-fault " + f.fault + " --out " + out.string() +
                     " > /dev/null 2>" + err.string());
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(s, 30) << "a rank waited for its control timeout";
  EXPECT_EQ(code, 2);  // the target stops with an error too
  nlohmann::json doc = OnlyDocument(out);
  EXPECT_EQ(doc["outcome"]["valid"], false);
  std::string reasons = doc["outcome"].dump();
  EXPECT_NE(reasons.find("socket reference (" + std::string(f.ops)), std::string::npos) << reasons;
  EXPECT_NE(reasons.find(f.reason), std::string::npos) << reasons;
  EXPECT_NE(ReadFile(err).find("kvbench rank 0 (target): "), std::string::npos) << ReadFile(err);
}

INSTANTIATE_TEST_SUITE_P(
    Faults, KvbenchReferenceFailure,
    ::testing::Values(
        // The target tells the initiator, which waits for ref_ready, not for pool bytes.
        ReferenceFailure{"ref-target-setup", "pull",
                         "peer reported: injected fault: the socket reference's staging buffer"},
        ReferenceFailure{"ref-target-setup", "push", "peer reported: injected fault"},
        // Cut partway: the failing rank aborts the connection; its peer stops at once.
        ReferenceFailure{"ref-initiator-stream", "push", "injected fault: partway"},
        ReferenceFailure{"ref-initiator-stream", "pull", "injected fault: partway"},
        ReferenceFailure{"ref-target-stream", "pull", "peer closed the connection"},
        ReferenceFailure{"ref-target-stream", "push", "control"},
        ReferenceFailure{"ref-initiator-setup", "pull", "injected fault: the socket reference's"}),
    [](const auto& info) {
      std::string name = std::string(info.param.fault) + "_" + info.param.ops;
      std::replace(name.begin(), name.end(), '-', '_');
      return name;
    });

// The target waits for the initiator's next message under its control timeout, also
// while the initiator runs a row's timed bursts alone: "busy" keeps it waiting
// (docs/METHODOLOGY.md, control plane). A calibration run times one burst; the real
// run's timed bursts then take about three control timeouts, and pass.
TEST(KvbenchEndToEnd, TimedBurstsLongerThanTheControlTimeoutKeepTheTargetWaiting) {
  Dirs FreshDir;
  fs::path probe = FreshDir("busy_probe"), out = FreshDir("busy"), err = FreshDir("busy_stderr");
  const std::string row =
      "run --transport shm --ops push --isl 8192 --batches 1 --warmup 1 "
      "--trials 1 --pool-budget 1GiB ";
  ASSERT_EQ(Kvbench(row + "--samples 3 --control-timeout 60s --out " + probe.string() +
                    " > /dev/null 2>&1"),
            0);
  const double burst_ms = OnlyDocument(probe)["rows"][0]["burst_ms"]["min"].get<double>();
  ASSERT_GT(burst_ms, 0);
  constexpr double kTimeoutMs = 2000;
  // Bursts run faster once warm: five timeouts' worth by the probe. A probe slowed
  // by a busy host can still leave the run short of the timeout: then it runs again
  // with four times the samples (at most twice).
  int samples = static_cast<int>(std::min(20000.0, 5 * kTimeoutMs / burst_ms) + 1);
  double timed_ms = 0;
  for (int attempt = 0; attempt < 3; ++attempt) {
    if (attempt > 0) samples = std::min(80000, samples * 4);
    fs::remove_all(out);  // a fresh folder for each run's one document
    ASSERT_EQ(
        Kvbench(row + "--samples " + std::to_string(samples) + " --control-timeout " +
                std::to_string(static_cast<int>(kTimeoutMs)) + "ms --progress-every 1s --out " +
                out.string() + " > /dev/null 2>" + err.string()),
        0)
        << ReadFile(err);
    // The long row said where it was: its timed bursts, with the time left in them.
    const std::string said = ReadFile(err);
    EXPECT_NE(said.find("[kvbench]   push isl 8192 batch 1: timed burst "), std::string::npos)
        << said;
    EXPECT_NE(said.find(" s left in them, "), std::string::npos) << said;
    // Counted apart from the warm-up burst (BurstProgress): of `samples`, not samples + 1.
    EXPECT_NE(said.find("/" + std::to_string(samples) + ", about "), std::string::npos) << said;
    nlohmann::json doc = OnlyDocument(out);
    ExpectValid(doc, "shm", 1);
    // What the test is about: the timed bursts alone (each to its last request's end)
    // outlasted the target's timeout.
    timed_ms = 0;
    for (const auto& burst : doc["rows"][0]["request_ms"]) {
      timed_ms += std::ranges::max(burst.get<std::vector<double>>());
    }
    if (timed_ms > 1.2 * kTimeoutMs) break;
  }
  EXPECT_GT(timed_ms, 1.2 * kTimeoutMs) << samples << " bursts";
}

// The other way round: the initiator waits for the target's answer while the target
// wipes its side of a row; a wipe longer than the control timeout (the fault lingers
// for 3 of them) says "busy" too. It used to fail the row with "peer silent", then
// the run with "unexpected 'ready' from the target". A timeout of 2.5 s (the run
// takes about 3 x 2.5 s): a shorter one is flaky on a loaded 2-core machine.
TEST(KvbenchEndToEnd, ATargetPreparingLongerThanTheControlTimeoutKeepsTheInitiatorWaiting) {
  Dirs FreshDir;
  fs::path out = FreshDir("target_busy"), err = FreshDir("target_busy_stderr");
  EXPECT_EQ(Kvbench("run --transport shm --ops push --isl 8192 --batches 1 --warmup 0 "
                    "--samples 1 --trials 1 --pool-budget 1GiB --control-timeout 2500ms "
                    "--inject-fault long-target-prepare --out " +
                    out.string() + " > /dev/null 2>" + err.string()),
            0)
      << ReadFile(err);
  ExpectValid(OnlyDocument(out), "shm", 1);
}

// A target silent past the control timeout fails the row and stops the run: it
// still says "busy" and "ready" for that row later, which the run, gone on to the
// next row, read as unexpected, or could take for the next row's own answer.
// 3 s: the timeout covers every control exchange (start-up and hello included),
// and a 1.5 s one could end the run elsewhere on a busy 2-core host.
TEST(KvbenchEndToEnd, ATargetSilentPastTheControlTimeoutStopsTheRun) {
  Dirs FreshDir;
  fs::path out = FreshDir("target_silent"), err = FreshDir("target_silent_stderr");
  EXPECT_NE(Kvbench("run --transport shm --ops push,pull --isl 8192 --batches 1 --warmup 0 "
                    "--samples 1 --trials 1 --pool-budget 1GiB --control-timeout 3000ms "
                    "--inject-fault silent-target-prepare --out " +
                    out.string() + " > /dev/null 2>" + err.string()),
            0)
      << ReadFile(err);
  nlohmann::json doc = OnlyDocument(out);
  EXPECT_EQ(doc["outcome"]["valid"], false);
  ASSERT_EQ(doc["rows"].size(), 1u) << doc["rows"].dump();  // pull never ran
  EXPECT_EQ(doc["rows"][0]["op"], "push");
  // The run stops for the timeout itself; it used to go on and then stop (or worse)
  // at the target's late answer: "unexpected 'ready' from the target".
  const std::string reasons = doc["outcome"].dump();
  EXPECT_NE(reasons.find("\"control: timeout: control: peer silent for 3000 ms\""),
            std::string::npos)
      << reasons;
  EXPECT_EQ(reasons.find("unexpected"), std::string::npos) << reasons;
}

TEST(KvbenchEndToEnd, LocalTransportRunsInOneProcess) {
  Dirs FreshDir;
  fs::path out = FreshDir("local");
  ASSERT_EQ(Kvbench(std::string("run --transport local --ops push ") + kTiny + " --out " +
                    out.string() + " > /dev/null"),
            0);
  ExpectValid(OnlyDocument(out), "local", 2);
}

// A second run into the same --out writes over the first's document (same case
// name) and says so on its "wrote" line; the first run's line does not.
TEST(KvbenchEndToEnd, ASecondRunSaysItReplacedTheDocument) {
  Dirs FreshDir;
  fs::path out = FreshDir("again"), err = FreshDir("again_stderr");
  const std::string run = std::string("run --transport local --ops push ") + kTiny + " --out " +
                          out.string() + " > /dev/null 2>" + err.string();
  ASSERT_EQ(Kvbench(run), 0);
  const std::string doc = (out / "kv-dsv4-b256-local-isl8k-b1_2-push.json").string();
  EXPECT_NE(ReadFile(err).find("[kvbench] wrote " + doc + "\n"), std::string::npos)
      << ReadFile(err);
  ASSERT_EQ(Kvbench(run), 0);
  EXPECT_NE(ReadFile(err).find("[kvbench] wrote " + doc + " (replaced an earlier document)\n"),
            std::string::npos)
      << ReadFile(err);
  ExpectValid(OnlyDocument(out), "local", 2);  // one document, no temporary file beside it
}

// Hand-started ranks: the initiator drives the run (README). The target's --ops,
// sampling, --lanes and --policy go unused, so ranks that differ in them run, and
// the document records what the initiator ran; the target writes no document.
TEST(KvbenchEndToEnd, HandStartedRanksRunTheInitiatorsRowsAndSettings) {
  Dirs FreshDir;
  fs::path out = FreshDir("hand"), target_out = FreshDir("hand_target");
  const std::string common =
      "run --transport shm --isl 8192 --batches 1 --pool-budget 1GiB "
      "--control-timeout 30s --peer " +
      FreeLoopbackPeer();
  ASSERT_EQ(RunHandStarted(common,
                           "--ops pull --warmup 0 --samples 5 --trials 2 --lanes 1 "
                           "--policy independent --out " +
                               target_out.string(),
                           "--ops push --warmup 1 --samples 3 --trials 1 --lanes 3 "
                           "--policy global-fifo --out " +
                               out.string()),
            0);
  nlohmann::json doc = OnlyDocument(out);
  ExpectValid(doc, "shm", 1);
  EXPECT_EQ(doc["rows"][0]["op"], "push");
  EXPECT_EQ(doc["rows"][0]["burst_ms"]["n"], 3);
  EXPECT_EQ(doc["sampling"]["warmup"], 1);
  EXPECT_EQ(doc["sampling"]["samples"], 3);
  EXPECT_EQ(doc["sampling"]["trials"], 1);
  EXPECT_EQ(doc["implementation"]["lanes"], 3);
  EXPECT_EQ(doc["implementation"]["policy"], "global-fifo");
  // Named by the initiator's settings that are not the defaults (DefaultCaseName).
  EXPECT_EQ(doc["identity"]["case"], "kv-dsv4-b256-shm-global-fifo-lanes3-isl8k-b1-push");
  // Provenance: the initiator's command line and host (common/environment.h).
  EXPECT_EQ(doc["command"].get<std::string>().rfind("kvbench run ", 0), 0u) << doc["command"];
  EXPECT_NE(doc["command"].get<std::string>().find("--policy global-fifo"), std::string::npos);
  EXPECT_TRUE(doc["environment"].contains("cpu_model")) << doc["environment"];
  EXPECT_TRUE(doc["environment"].contains("loadavg_end")) << doc["environment"];
  EXPECT_FALSE(fs::exists(target_out));
}

// A usage error (unknown flag, missing subcommand, a value CLI11 cannot read) exits
// 2 like every other setup error; --help exits 0.
TEST(KvbenchEndToEnd, UsageErrorsExitTwo) {
  for (const char* args :
       {"", "run --bogus", "plan --isl x", "run --samples", "summarize", "run extra_positional",
        // Negative numbers for unsigned flags (CLI11 used to wrap them: --isl -5 crashed a rank).
        "plan --isl -5", "plan --batches 1,-1", "run --seed -1", "plan --isl 99999999999999",
        // Values that used to stand for "the default" inside, refused when given (and a
        // rank out of range, refused by the flag since -1 is refused).
        "plan --block 0", "run --block 0", "run --rank -1", "run --rank 2", "run --case ''",
        "run --progress-every 5x"}) {
    EXPECT_EQ(Kvbench(std::string(args) + " > /dev/null 2>&1"), 2) << args;
  }
  EXPECT_EQ(Kvbench("run --help > /dev/null"), 0);
}

// --version names the build, the same string documents carry as provenance.
TEST(KvbenchEndToEnd, VersionNamesTheBuild) {
  Dirs FreshDir;
  const fs::path out = FreshDir("version");
  ASSERT_EQ(Kvbench("--version > " + out.string()), 0);
  EXPECT_EQ(ReadFile(out), kvlane::VersionString() + "\n");
}

// A negative sampling flag is a usage error naming the flag (not the preset's value
// in disguise), refused before anything else is checked or started.
TEST(KvbenchEndToEnd, NegativeSamplingFlagExitsTwo) {
  Dirs FreshDir;
  fs::path dir = FreshDir("negative"), err = FreshDir("negative_stderr");
  fs::create_directories(dir);
  std::ofstream(dir / "file") << "x";  // an --out refused too, were the flag let through
  for (const char* flag : {"--warmup", "--samples", "--trials"}) {
    EXPECT_EQ(Kvbench(std::string("run --transport shm ") + flag + " -1 --out " +
                      (dir / "file" / "sub").string() + " > /dev/null 2>" + err.string()),
              2)
        << flag;
    const std::string said = ReadFile(err);
    EXPECT_EQ(said.rfind("kvbench run: " + std::string(flag) + " -1: need at least ", 0), 0u)
        << said;
  }
}

nlohmann::json PlanJson(const std::string& flags, const fs::path& file) {
  EXPECT_EQ(Kvbench("plan --json " + flags + " > " + file.string()), 0) << flags;
  std::ifstream in(file);
  return nlohmann::json::parse(in, nullptr, false);
}

// `plan` with no flags shows what `run` with no flags measures: the quick grid and
// a pool budget capped at a quarter of the host memory bound (MemAvailable, or a
// cgroup's headroom where smaller), not the full grid at 64 GiB;
// and with the same grid flags it prints the very plan the run's document records.
TEST(KvbenchEndToEnd, PlanShowsWhatRunMeasures) {
  Dirs FreshDir;
  fs::path dir = FreshDir("plan_run"), out = FreshDir("plan_run_out");
  fs::create_directories(dir);
  nlohmann::json plain = PlanJson("", dir / "plain.json");
  EXPECT_EQ(plain["options"]["isl"], nlohmann::json({8192, 32768}));
  EXPECT_EQ(plain["options"]["batches"], nlohmann::json({1, 2, 4}));
  const uint64_t bound = kvbench::ReadHostMemory().Bytes();
  if (bound != 0 && bound / 4 < (60ull << 30)) {
    EXPECT_LT(plain["options"]["pool_budget"].get<uint64_t>(), 64ull << 30);
  }
  EXPECT_EQ(PlanJson("--grid full", dir / "full.json")["options"]["isl"].size(), 4u);
  EXPECT_EQ(Kvbench("plan --grid huge 2>/dev/null"), 2);
  const std::string grid = "--workload contig --pool-budget 1GiB";
  nlohmann::json plan = PlanJson(grid, dir / "plan.json");
  ASSERT_EQ(Kvbench("run --transport local --ops push --warmup 0 --samples 1 --trials 1 " + grid +
                    " --out " + out.string() + " > /dev/null 2>&1"),
            0);
  EXPECT_EQ(OnlyDocument(out)["workload"], plan);
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
