#include "document.h"

#include <cmath>

#include "isolation.h"
#include "kvlane/agent.h"
#include "pinning.h"
#include "run_result.h"
#include "stats.h"
#include "tail.h"

namespace lanebench {
namespace {

Doc RunDoc(const Case& c, const RunRecord& r) {
  const nlohmann::json& res = r.result;
  Doc d = {{"pair", r.pair}, {"position", r.position}, {"valid", RunValid(res)}};
  for (const char* k :
       {"error", "warning", "first_failure", "transport", "iterations", "verified",
        "warmup_verified", "failed", "failed_iterations", "exit_codes", "poller_cpu"})
    if (res.contains(k)) d[k] = res[k];
  d["metrics"] = RunMetrics(c, res);
  d["lat_us"] = res.value("lat_us", nlohmann::json::object());
  d["done_us"] = res.value("done_us", nlohmann::json::object());
  d["done_sweep"] = res.value("done_sweep", nlohmann::json::object());
  d["window_us"] = res.value("window_us", nlohmann::json::array());
  d["gap_us"] = res.value("gap_us", nlohmann::json::array());
  d["post_us"] = res.value("post_us", nlohmann::json::object());
  d["stall_us"] = res.value("stall_us", nlohmann::json::object());
  if (res.contains("host_stalls")) d["host_stalls"] = res["host_stalls"];
  return d;
}

// Every metric over the measured iterations of the arm's valid runs together, and
// how many iterations that is (of the watched transfer).
Doc PooledDoc(const Case& c, const std::string& arm, const std::vector<RunRecord>& records) {
  nlohmann::json pooled = nlohmann::json::object();
  for (const RunRecord& r : records)
    if (r.case_id == c.id && r.arm == arm && RunValid(r.result)) PoolSeries(r.result, &pooled);
  Doc d = RunMetrics(c, pooled);
  d["samples"] = RunSeries(pooled, "lat_us", WatchedXfer(c.shape)).size();
  return d;
}

Doc ArmDoc(const Case& c, const std::string& arm, const std::vector<RunRecord>& records) {
  Doc runs = Doc::array();
  for (const RunRecord& r : records)
    if (r.case_id == c.id && r.arm == arm) runs.push_back(RunDoc(c, r));
  Doc median = Doc::object();
  for (const MetricDef& m : MetricDefs(c.shape)) {
    std::vector<double> v;
    for (const Doc& run : runs)
      if (run["valid"].get<bool>()) v.push_back(run["metrics"][m.key].get<double>());
    median[m.key] = Median(v);
  }
  return {{"median", median},
          {"pooled", PooledDoc(c, arm, records)},
          {"tail", TailDoc(c, arm, records)},
          {"runs", runs}};
}

Doc CaseDoc(const Case& c, const std::vector<RunRecord>& records) {
  Doc d = {{"id", c.id},
           {"shape", c.shape},
           {"op", c.op},
           {"bytes", c.bytes},
           {"lanes_per_peer", c.spec.lanes_per_peer},
           {"targets", c.spec.target_bytes.size()},
           {"xfers", Doc::parse(nlohmann::json(c.spec.xfers).dump())}};
  for (const char* arm : {kBaseline, kCandidate}) d["arms"][arm] = ArmDoc(c, arm, records);
  return d;
}

std::vector<double> RunValues(const Doc& arm, const char* key) {
  std::vector<double> v;
  for (const Doc& run : arm["runs"]) v.push_back(run["metrics"].value(key, NAN));
  return v;
}

// Beside RunValues: whether each run counted (an invalid one is not in the median).
std::vector<bool> RunsValid(const Doc& arm) {
  std::vector<bool> v;
  for (const Doc& run : arm["runs"]) v.push_back(run.value("valid", false));
  return v;
}

Doc TableRows(const Doc& case_doc) {
  Doc rows = Doc::array();
  const Doc& base = case_doc["arms"][kBaseline];
  const Doc& cand = case_doc["arms"][kCandidate];
  for (const MetricDef& m : MetricDefs(case_doc["shape"])) {
    double b = base["median"].value(m.key, NAN), c = cand["median"].value(m.key, NAN);
    rows.push_back({{"case", case_doc["id"]},
                    {"metric", m.label},
                    {"key", m.key},
                    {"baseline", b},
                    {"candidate", c},
                    {"change_pct", (c - b) / b * 100.0},
                    {"baseline_runs", RunValues(base, m.key)},
                    {"candidate_runs", RunValues(cand, m.key)},
                    {"baseline_runs_valid", RunsValid(base)},
                    {"candidate_runs_valid", RunsValid(cand)}});
  }
  return rows;
}

Doc MethodDoc() {
  return {
      {"latency",
       "post to completion as the source's API reports it: from just before "
       "Agent::Post() to the first Agent::Check() that returns a terminal status; the "
       "source polls Check() in a loop (latest post first), yielding the CPU after "
       "sweeps that saw nothing finish (source clock; not a receiver or hardware "
       "timestamp)"},
      {"window",
       "mixed: (bulk + small bytes) / p50 of the per-iteration window from the first "
       "Post() to the last observed completion, decimal GB/s; includes software "
       "completion overhead (completer publication, Check polling)"},
      {"order",
       "mixed: the bulk transfer is posted first, then the small one; each has its own "
       "data lane (lanes_per_peer 1 with two target processes)"},
      {"percentiles", "nearest-rank over each run's measured iterations, or over the pooled ones"},
      {"small_first",
       "mixed: percent of iterations in which the source saw the small transfer "
       "done in an earlier Check() sweep than the bulk one (sweeps check the latest "
       "post first, so global-fifo reads 0 by construction)"},
      {"summary",
       "each cell is the median of the per-run values; every run's value is kept. Each arm "
       "also has every metric over its valid runs' samples pooled"},
      {"isolation",
       "mixed small p99 / the same op's single-lane p99 at the small size, each over the "
       "arm's valid runs' samples pooled; beside it the same ratio within each process "
       "pair (lowest..highest)"},
      {"tail",
       "per arm and case, over all runs: iterations whose watched transfer (mixed: small; "
       "single: the transfer) took over twice its run's median, split into: the polling "
       "thread went 5 us or more without looking at the clock after its Post() returned "
       "(it did not run: stalled), Post() took 5 us or more, neither. The host-stall "
       "probe spins on the poller's CPU before the run's transfers and counts such gaps "
       "with no transfer in flight. The p99 with stalled iterations left out is a "
       "diagnostic beside the target's p99, not a replacement"},
      {"processes",
       "fresh processes per run (fork+exec of lanebench: one source, one target "
       "per peer); pair by pair, each pair running every case (the mixed one, then its "
       "single-lane control, then the other single ones) in both arms back to back; arm "
       "order rotates between process pairs"},
      {"verify",
       "every iteration, warm-up included, is checked outside the timed region "
       "against an oracle mixing source rank, epoch, where the payload belongs (target "
       "and offset in its buffer) and byte offset; the first 8 bytes of each payload hold "
       "the epoch. Right after completion the side the bytes moved from is overwritten "
       "(write: the source's buffers; read: the target's region, the source's buffers "
       "checked before and after), so bytes moved after completion fail"}};
}

Doc VerificationDoc(const std::vector<RunRecord>& records, size_t planned) {
  int64_t iterations = 0, verified = 0, valid = 0;  // runs x iterations: past int's range
  for (const RunRecord& r : records) {
    iterations += r.result.value("iterations", int64_t{0});
    verified += r.result.value("verified", int64_t{0});
    valid += RunValid(r.result) ? 1 : 0;
  }
  return {{"runs", records.size()},
          {"runs_planned", planned},
          {"valid_runs", valid},
          {"measured_iterations", iterations},
          {"verified_iterations", verified}};
}

}  // namespace

Doc BuildDocument(const BenchConfig& cfg, const std::vector<Case>& cases,
                  const std::vector<RunRecord>& records, const std::string& command,
                  const Doc& environment) {
  Doc d = {{"version", 2},
           {"tool", "lanebench"},
           {"kvlane", kvlane::VersionString()},
           {"command", command},
           {"environment", environment}};
  d["config"] = {{"transport", cfg.transport},
                 {"memory", cfg.ResolvedMemory()},
                 {"shape", cfg.shape},
                 {"mixed_op", cfg.mixed_op},
                 {"mixed_peers", cfg.mixed_peers},
                 {"bulk_bytes", cfg.bulk_bytes},
                 {"small_bytes", cfg.small_bytes},
                 {"single_ops", cfg.single_ops},
                 {"single_bytes", cfg.single_bytes},
                 {"warmup", cfg.warmup},
                 {"iters", cfg.iters},
                 {"pairs", cfg.pairs},
                 {"spin_us", cfg.spin_us},
                 {"pin", cfg.pin},
                 {"proxy_renew_us", cfg.proxy_renew_us},
                 {"post_inline_bytes", cfg.post_inline_bytes},
                 {"stall_probe_ms", cfg.stall_probe_ms},
                 {"idle_us", cfg.ResolvedIdleUs()}};
  if (cfg.inject_fault != "none") d["config"]["inject_fault"] = cfg.inject_fault;
  {
    const RunSpec spec =
        cases.empty() ? RunSpec{} : cases.front().spec;  // every case is pinned alike
    d["config"]["pinning"] = spec.poller_cpu >= 0
                                 ? Doc{{"on", true},
                                       {"poller_cpu", spec.poller_cpu},
                                       {"worker_cpus", CpuListName(spec.worker_cpus)}}
                                 : Doc{{"on", false}};
  }
  d["method"] = MethodDoc();
  d["baseline"] = kBaseline;
  d["candidate"] = kCandidate;
  d["cases"] = Doc::array();
  d["table"] = Doc::array();
  for (const Case& c : cases) {
    d["cases"].push_back(CaseDoc(c, records));
    for (const Doc& row : TableRows(d["cases"].back())) d["table"].push_back(row);
  }
  d["isolation"] = Isolation(MixedId(cfg), IsolationControlId(cfg), d["cases"]);
  if (d["isolation"].empty()) {  // which of the two cases the plan lacks, for the report
    const bool mixed = !cases.empty() && cases.front().id == MixedId(cfg);
    d["isolation_missing"] = mixed ? IsolationControlId(cfg) : MixedId(cfg);
  }
  const size_t planned = PlannedRuns(cfg, cases.size());
  d["verification"] = VerificationDoc(records, planned);
  d["outcome"] = d["verification"]["valid_runs"] == records.size() ? "ok" : "invalid";
  d["complete"] = records.size() == planned;
  return d;
}

void MarkStopped(Doc* doc, const std::string& signal_name) {
  (*doc)["outcome"] = "stopped";
  (*doc)["stopped_by"] = signal_name;
}

}  // namespace lanebench
