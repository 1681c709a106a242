#include "report.h"

#include <fmt/format.h>

#include <cmath>

namespace lanebench {
namespace {

std::string Num(double v) {
  if (std::isnan(v)) return "n/a";
  return std::fabs(v) < 10 ? fmt::format("{:.3f}", v) : fmt::format("{:.1f}", v);
}

// Num(v) followed by `unit` ("x", "/s", "%"); a missing value is "n/a" alone.
std::string NumUnit(double v, const char* unit) { return std::isnan(v) ? Num(v) : Num(v) + unit; }

double Get(const Doc& j, const char* key) {
  return j.contains(key) && j[key].is_number() ? j[key].get<double>() : NAN;
}

// The runs' values, each invalid run's marked "*" (`valid`: one bool per value; all
// valid when absent).
std::string RunList(const Doc& values, const Doc& valid) {
  std::string s;
  for (size_t i = 0; i < values.size(); ++i) {
    const Doc& v = values[i];
    const bool counted = !valid.is_array() || i >= valid.size() || valid[i].get<bool>();
    s += (s.empty() ? "" : " ") + Num(v.is_number() ? v.get<double>() : NAN) + (counted ? "" : "*");
  }
  return s;
}

// Whether a table row lists an invalid run.
bool ListsInvalid(const Doc& row) {
  for (const char* key : {"baseline_runs_valid", "candidate_runs_valid"})
    if (row.contains(key))
      for (const Doc& v : row[key])
        if (!v.get<bool>()) return true;
  return false;
}

void PrintTable(const Doc& doc, std::FILE* out) {
  fmt::print(out, "{:<18} {:<19} {:>12} {:>12} {:>8}   {}\n", "case", "metric", "global-fifo",
             "independent", "change", "per-run values: global-fifo | independent");
  std::string last_case;
  bool invalid = false;
  for (const Doc& row : doc["table"]) {
    invalid = invalid || ListsInvalid(row);
    std::string id = row["case"];
    if (!last_case.empty() && id != last_case) fmt::print(out, "\n");
    double b = Get(row, "baseline"), c = Get(row, "candidate"), ch = Get(row, "change_pct");
    fmt::print(out, "{:<18} {:<19} {:>12} {:>12} {:>8}   {} | {}\n", id == last_case ? "" : id,
               row["metric"].get<std::string>(), Num(b), Num(c),
               !std::isfinite(ch) ? "n/a" : fmt::format("{:+.1f}%", ch),
               RunList(row["baseline_runs"], row.value("baseline_runs_valid", Doc())),
               RunList(row["candidate_runs"], row.value("candidate_runs_valid", Doc())));
    last_case = id;
  }
  if (invalid)
    fmt::print(out,
               "{:<18} * an invalid run (a failed or unverified iteration): not in the "
               "medians\n",
               "");
}

// "  (300 / 300 samples; per pair 1.100x..1.400x)": what the ratio stands on.
std::string IsolationSpread(const Doc& r) {
  return fmt::format("   ({} / {} samples; per pair {}..{})", r.value("mixed_samples", 0),
                     r.value("single_samples", 0), NumUnit(Get(r, "ratio_min"), "x"),
                     NumUnit(Get(r, "ratio_max"), "x"));
}

void PrintIsolation(const Doc& doc, std::FILE* out) {
  if (doc["isolation"].empty()) {
    if (doc.contains("isolation_missing"))
      fmt::print(out, "\nisolation: no {} case in this run\n",
                 doc["isolation_missing"].get<std::string>());
    return;
  }
  fmt::print(out,
             "\nisolation: mixed small p99 / {} p99 (same op, single lane), each over the "
             "arm's valid runs pooled;\n           per pair: the same ratio within each process "
             "pair, lowest..highest\n",
             doc["isolation"][0]["single_case"].get<std::string>());
  for (const Doc& r : doc["isolation"])
    fmt::print(out, "  {:<12} {:>10} / {:>8} = {}{}\n", r["arm"].get<std::string>(),
               Num(Get(r, "mixed_small_p99_us")), Num(Get(r, "single_p99_us")),
               NumUnit(Get(r, "ratio"), "x"), IsolationSpread(r));
  fmt::print(out,
             "  diagnostic, not the target: the same over iterations whose poller did not "
             "stall (see tail)\n");
  for (const Doc& r : doc["isolation"])
    fmt::print(out, "  {:<12} {:>10} / {:>8} = {}\n", r["arm"].get<std::string>(),
               Num(Get(r, "mixed_small_p99_unstalled_us")), Num(Get(r, "single_p99_unstalled_us")),
               NumUnit(Get(r, "ratio_unstalled"), "x"));
}

// One line per case and arm: the slow iterations and what the source saw in them.
void PrintTail(const Doc& doc, std::FILE* out) {
  fmt::print(out,
             "\ntail: iterations over 2x their run's median (pooled over runs), and what the "
             "source saw in them;\n      host stalls: the probe on the poller's CPU before "
             "the transfers (gaps >= 5 us, >= 10 us per second; time lost)\n");
  for (const Doc& c : doc["cases"])
    for (const auto& [arm, a] : c["arms"].items()) {
      const Doc& t = a["tail"];
      fmt::print(out,
                 "  {:<18} {:<12} {:>3}/{:<4} slow: poller stalled {}, Post() slow {}, "
                 "neither {}; host stalls {}, {}, {}\n",
                 c["id"].get<std::string>(), arm, t.value("slow", int64_t{0}),
                 t.value("measured", int64_t{0}), t.value("slow_stalled", int64_t{0}),
                 t.value("slow_post", int64_t{0}), t.value("slow_other", int64_t{0}),
                 NumUnit(Get(t, "host_stalls_5us_per_s"), "/s"),
                 NumUnit(Get(t, "host_stalls_10us_per_s"), "/s"),
                 NumUnit(Get(t, "host_stalled_pct"), "%"));
    }
}

// A stopped run's document holds the runs that finished: said before the tables.
void PrintPartial(const Doc& doc, std::FILE* out) {
  if (!doc.contains("stopped_by")) return;
  const Doc& v = doc["verification"];
  fmt::print(out,
             "\nPARTIAL RESULT, not a full run: stopped by {} after {} of {} runs; every value "
             "below is over the runs that finished (n/a where none did)\n",
             doc["stopped_by"].get<std::string>(), v["runs"].get<int>(),
             v.value("runs_planned", 0));
}

}  // namespace

void PrintPreamble(const Doc& doc, std::FILE* out) {
  const Doc& env = doc["environment"];
  const Doc& cfg = doc["config"];
  fmt::print(out, "lanebench ({})\n", doc["kvlane"].get<std::string>());
  fmt::print(out, "host: {}, {} CPUs ({}), {}, {}, load average {}\n",
             env["host"].get<std::string>(), env["cpus"].get<int>(),
             env["cpu_model"].get<std::string>(), env["kernel"].get<std::string>(),
             env["date_utc"].get<std::string>(), env["loadavg_start"].get<std::string>());
  fmt::print(out, "command: {}\n", doc["command"].get<std::string>());
  fmt::print(out,
             "config: transport {}, memory {}, {} process pairs per arm and case, "
             "{} warm-up + {} measured iterations per run, arm order rotates between pairs, "
             "{}\n",
             cfg["transport"].get<std::string>(), cfg["memory"].get<std::string>(),
             cfg["pairs"].get<int>(), cfg["warmup"].get<int>(), cfg["iters"].get<int>(),
             cfg.value("spin_us", int64_t{-1}) < 0
                 ? std::string("engine defaults for idle workers (AgentOptions::spin, "
                               "cuda_proxy_idle_exit)")
                 : fmt::format("engine workers kept awake {} us after their last work (--spin-us)",
                               cfg["spin_us"].get<int64_t>()));
  if (const int64_t idle = cfg.value("idle_us", int64_t{0}); idle > 0)
    fmt::print(out,
               "idle: every timed iteration starts at least {} us after the previous one ended, "
               "in every case (--idle-us)\n",
               idle);
  if (cfg.contains("inject_fault")) {
    const std::string fault = cfg["inject_fault"].get<std::string>();
    const char* what =
        fault.rfind("repost", 0) == 0
            ? "that measured iteration's transfers of every run are posted again after their "
              "completion and the overwrite of their sources, before verification"
        : fault.rfind("stop-peer", 0) == 0
            ? "the target of a transfer of that measured iteration of every run is stopped "
              "before its timed region"
            : "one received byte of that measured iteration of every run is flipped before its "
              "verification";
    fmt::print(out, "FAULT INJECTED (testing, --inject-fault {}): {}, which must fail it\n", fault,
               what);
  }
  if (const Doc& pin = cfg["pinning"]; pin.value("on", false))
    fmt::print(
        out,
        "pinning: the source's polling thread alone on CPU {}; every other thread of the run "
        "(engine lanes, servers, CUDA runtime, targets) on CPUs {} (--pin {})\n",
        pin["poller_cpu"].get<int>(), pin["worker_cpus"].get<std::string>(),
        cfg["pin"].get<std::string>());
  else
    fmt::print(out, "pinning: off (--pin {}): the scheduler places every thread\n",
               cfg["pin"].get<std::string>());
  for (const auto& [key, text] : doc["method"].items())
    fmt::print(out, "method.{}: {}\n", key, text.get<std::string>());
  fmt::print(out, "\n");
}

void PrintResults(const Doc& doc, std::FILE* out) {
  PrintPartial(doc, out);
  fmt::print(out,
             "\nbaseline = {}, candidate = {}; change = (candidate - baseline) / baseline; "
             "latencies: lower is better, rate: higher is better\n",
             doc["baseline"].get<std::string>(), doc["candidate"].get<std::string>());
  PrintTable(doc, out);
  PrintIsolation(doc, out);
  PrintTail(doc, out);
  const Doc& v = doc["verification"];
  fmt::print(out, "\nload average at the end: {}\n",
             doc["environment"].value("loadavg_end", std::string("?")));
  fmt::print(out, "verified: {}/{} measured iterations; {}/{} runs valid; outcome: {}{}\n",
             v["verified_iterations"].get<int64_t>(), v["measured_iterations"].get<int64_t>(),
             v["valid_runs"].get<int>(), v["runs"].get<int>(), doc["outcome"].get<std::string>(),
             doc.contains("stopped_by")
                 ? " (incomplete: stopped by " + doc["stopped_by"].get<std::string>() + ")"
                 : std::string());
}

}  // namespace lanebench
