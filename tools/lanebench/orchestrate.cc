#include "orchestrate.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>

#include "buffers.h"
#include "result_check.h"
#include "spawn.h"
#include "stop_signal.h"
#include "worker.h"

namespace lanebench {
namespace {

using Clock = std::chrono::steady_clock;

// A run's temporary directory ($TMPDIR/lanebench-XXXXXX), removed with everything
// in it when this goes out of scope: on every way out of RunGroup.
class RunDir {
 public:
  static kvlane::Result<std::unique_ptr<RunDir>> Make() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "lanebench-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr)
      return kvlane::Status::Backend("mkdtemp " + tmpl + ": " + std::strerror(errno));
    return std::unique_ptr<RunDir>(new RunDir(tmpl));
  }
  ~RunDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  RunDir(const RunDir&) = delete;
  RunDir& operator=(const RunDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  explicit RunDir(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

// True once this process was asked to stop: its workers are asked to stop too
// (SIGTERM), and killed if still there kStopGrace later (spawn.h).
bool Stopping() { return StopSignal() != 0; }

// Spawns the targets, then the source; returns their pids (source last).
kvlane::Result<std::vector<pid_t>> SpawnGroup(const RunSpec& spec, const std::string& dir) {
  std::vector<pid_t> pids;
  for (size_t i = 0; i < spec.target_bytes.size() + 1; ++i) {
    const bool source = i == spec.target_bytes.size();
    auto pid = source ? SpawnSelf({"--role", "source", "--dir", dir})
                      : SpawnSelf({"--role", "target", "--dir", dir, "--index", std::to_string(i)});
    if (!pid.ok()) {
      for (pid_t p : pids) WaitOrKill(p, Clock::now(), nullptr, Stopping);
      return pid.status();
    }
    pids.push_back(pid.value());
  }
  return pids;
}

// True once `path` has existed for `grace` (the process had its say).
std::function<bool()> ExistedFor(const std::string& path, std::chrono::seconds grace) {
  auto seen = std::make_shared<Clock::time_point>(Clock::time_point::max());
  return [=] {
    if (*seen == Clock::time_point::max() && std::filesystem::exists(path)) *seen = Clock::now();
    return *seen != Clock::time_point::max() && Clock::now() - *seen >= grace;
  };
}

// Why a source left no result: killed at the deadline of --timeout, or its exit code.
std::string NoResultError(const RunSpec& spec, int code, Clock::duration ran, bool timed_out) {
  if (timed_out && code == -1)
    return fmt::format("the source timed out (--timeout {:g} s): killed after {:.1f} s",
                       spec.timeout_s, std::chrono::duration<double>(ran).count());
  return fmt::format("the source left no result (exit code {})", code);
}

// Waits for the source (a few seconds past its result at most), then for the
// targets. A process that had to be killed after a complete result is a warning.
nlohmann::json Reap(const std::vector<pid_t>& pids, const RunSpec& spec, const std::string& dir) {
  constexpr std::chrono::seconds kGrace(5);
  const auto start = Clock::now();
  const auto deadline = start + SpecTimeout(spec);
  nlohmann::json codes = {
      {"source", WaitOrKill(pids.back(), deadline, ExistedFor(ResultPath(dir), kGrace), Stopping)}};
  const auto ran = Clock::now() - start;
  auto res = ReadJsonFile(ResultPath(dir));
  // A source exits 1 when its result says the run failed (a payload did not verify): as
  // written, before the check below may turn a malformed "ok" result into a failed run.
  const int source_expected = res.ok() ? ExpectedSourceExit(res.value()) : 0;
  if (res.ok()) res = CheckedResult(std::move(res).value(), spec);  // then of the expected types
  bool clean = codes["source"] == source_expected;
  for (size_t i = 0; i + 1 < pids.size(); ++i) {
    codes["targets"].push_back(
        WaitOrKill(pids[i], std::min(deadline, Clock::now() + kGrace), nullptr, Stopping));
    clean = clean && codes["targets"].back() == 0;
  }
  nlohmann::json out = res.ok() ? res.value() : nlohmann::json{{"ok", false}};
  if (!res.ok()) out["error"] = NoResultError(spec, codes["source"], ran, start + ran >= deadline);
  if (res.ok() && !clean) out["warning"] = "a process did not exit cleanly after the result";
  out["exit_codes"] = codes;
  return out;
}

nlohmann::json RunGroup(const RunSpec& spec) {
  auto fail = [](const kvlane::Status& s) {
    return nlohmann::json{{"ok", false}, {"error", s.ToString()}};
  };
  auto dir = RunDir::Make();
  if (!dir.ok()) return fail(dir.status());
  const std::string& path = dir.value()->path();
  kvlane::Status s = WriteJsonFile(SpecPath(path), spec);
  auto pids = s.ok() ? SpawnGroup(spec, path) : kvlane::Result<std::vector<pid_t>>(s);
  return pids.ok() ? Reap(pids.value(), spec, path) : fail(pids.status());
}

void PrintProgress(const RunRecord& r, size_t index, size_t total) {
  const nlohmann::json& res = r.result;
  std::string status = "verified " + std::to_string(res.value("verified", int64_t{0})) + "/" +
                       std::to_string(res.value("iterations", int64_t{0}));
  if (!res.value("ok", false))
    status = "FAILED: " + res.value("error", res.value("first_failure", std::string("?")));
  if (res.contains("warning")) status += " (warning: " + res["warning"].get<std::string>() + ")";
  std::fprintf(stderr, "[%zu/%zu] %-20s pair %d %-12s %s\n", index, total, r.case_id.c_str(),
               r.pair, r.arm.c_str(), status.c_str());
}

}  // namespace

kvlane::Status ProbeTransport(const BenchConfig& cfg) {
  RunSpec spec;
  spec.transport = cfg.transport;
  spec.policy = kCandidate;
  // The memory first: a device space selects its GPU before the agents exist.
  KVLANE_ASSIGN_OR_RETURN(auto space, MakeBufferSpace(cfg.ResolvedMemory(), /*role=*/1));
  KVLANE_ASSIGN_OR_RETURN(uint8_t * buf, space->Allocate(4096));
  KVLANE_ASSIGN_OR_RETURN(auto a, MakeAgent(spec, "probe-a"));
  KVLANE_ASSIGN_OR_RETURN(auto b, MakeAgent(spec, "probe-b"));
  KVLANE_RETURN_IF_ERROR(b->RegisterMemory(buf, 4096, space->kind(), space->device()).status());
  KVLANE_ASSIGN_OR_RETURN(std::string blob, b->ExportMetadata());
  KVLANE_RETURN_IF_ERROR(a->LoadPeer(blob).status());
  KVLANE_ASSIGN_OR_RETURN(std::string chosen, a->PeerTransport("probe-b", space->kind()));
  if (chosen != cfg.transport) return kvlane::Status::NotSupported("the engine chose " + chosen);
  return kvlane::Status::Ok();
}

std::vector<RunRecord> RunPlan(const BenchConfig& cfg, const std::vector<Case>& cases) {
  std::vector<RunRecord> records;
  const std::vector<PlannedRun> order = RunOrder(cfg, cases.size());
  for (const PlannedRun& run : order) {
    const Case& c = cases[run.case_index];
    RunSpec spec = c.spec;
    spec.policy = run.arm;
    if (Stopping()) return records;
    nlohmann::json result = RunGroup(spec);
    if (Stopping()) return records;  // a run stopped part-way is no result
    records.push_back({c.id, run.arm, run.pair, run.position, std::move(result)});
    PrintProgress(records.back(), records.size(), order.size());
  }
  return records;
}

}  // namespace lanebench
