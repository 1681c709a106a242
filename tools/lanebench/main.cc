// lanebench: what independent lane progress buys and costs, measured side by
// side against global-fifo in one run. See tools/lanebench/README.md.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstring>
#include <string>

#include "common/environment.h"
#include "control.h"
#include "kvlane/agent.h"
#include "orchestrate.h"
#include "pinning.h"
#include "report.h"
#include "stop_signal.h"
#include "worker.h"

namespace lanebench {
namespace {

constexpr int kExitInvalid = 1;       // a run failed or a payload did not verify
constexpr int kExitUnavailable = 77;  // the transport (or memory) cannot be used here

void AddBenchFlags(CLI::App& app, BenchConfig& cfg) {
  app.add_option("--transport", cfg.transport, "tcp | shm | cuda")->capture_default_str();
  app.add_option("--memory", cfg.memory, "host | device (default: device for cuda, else host)");
  app.add_option("--shape", cfg.shape, "mixed | single | all")->capture_default_str();
  app.add_option("--mixed-op", cfg.mixed_op, "mixed shape op: read | write")->capture_default_str();
  app.add_option("--mixed-peers", cfg.mixed_peers,
                 "2: two target processes, one lane each; 1: two lanes of one target")
      ->capture_default_str();
  app.add_option("--bulk-bytes", cfg.bulk_bytes, "mixed bulk size")
      ->transform(CLI::AsSizeValue(false))
      ->capture_default_str();
  app.add_option("--small-bytes", cfg.small_bytes, "mixed small size")
      ->transform(CLI::AsSizeValue(false))
      ->capture_default_str();
  app.add_option("--single-ops", cfg.single_ops, "single shape ops (default read,write)")
      ->delimiter(',');
  app.add_option("--single-bytes", cfg.single_bytes, "single shape sizes (default 4KiB,2MiB)")
      ->delimiter(',')
      ->transform(CLI::AsSizeValue(false));
  app.add_option("--warmup", cfg.warmup, "warm-up iterations per run")->capture_default_str();
  app.add_option("--iters", cfg.iters, "measured iterations per run")->capture_default_str();
  app.add_option("--pairs", cfg.pairs, "process pairs per arm and case")->capture_default_str();
  app.add_option("--timeout", cfg.timeout_s, "seconds per process group")->capture_default_str();
  app.add_option("--spin-us", cfg.spin_us,
                 "engine workers and the cuda proxy stay awake this long after their last work "
                 "(-1: engine defaults, where idle lane threads sleep between iterations)")
      ->capture_default_str();
  app.add_option("--pin", cfg.pin,
                 "the source's polling thread on a CPU of its own, every other thread of the run "
                 "on the rest: auto (on with at least 4 CPUs) | on | off")
      ->capture_default_str();
  app.add_option("--proxy-renew-us", cfg.proxy_renew_us,
                 "cuda: AgentOptions::cuda_proxy_renew_every in us, 0 off (-1: engine default)")
      ->capture_default_str();
  app.add_option("--post-inline-bytes", cfg.post_inline_bytes,
                 "tcp, shm: AgentOptions::post_inline_bytes, the largest frame a posting thread "
                 "sends itself (0: lane threads send every frame; -1: engine default)")
      ->capture_default_str();
  app.add_option("--stall-probe-ms", cfg.stall_probe_ms,
                 "each source first spins this long on its polling thread's CPU and records "
                 "when that thread did not run (host stalls, no kvlane involved); 0: no probe")
      ->capture_default_str();
  app.add_option("--idle-us", cfg.idle_us,
                 "each timed iteration starts at least this long after the previous one ended "
                 "(staging and verification count), so that the single-lane controls and the "
                 "mixed shape start from equally idle lanes; -1: 3000 on tcp and shm, 0 on cuda")
      ->capture_default_str();
  app.add_option("--json", cfg.json, "where to write the JSON document")->capture_default_str();
  app.add_option("--inject-fault", cfg.inject_fault,
                 "testing only: flip-byte:N flips one received byte of measured iteration N "
                 "(flip-byte: 1) in every run, after it landed and before its verification, "
                 "which must then fail it (the run invalid, exit 1); of the first transfer, or "
                 "with flip-byte:N:small (or :bulk; --shape mixed) of that one. repost:N posts "
                 "iteration N's transfers again after their completion and the overwrite of "
                 "their sources, which its verification must also fail. stop-peer:N (or "
                 "stop-peer:N:small) stops that transfer's target before iteration N: the "
                 "source must give up at its deadline, naming the transfer")
      ->capture_default_str()
      ->group("Testing");
}

int Unavailable(const BenchConfig& cfg, const Doc& base, const kvlane::Status& why) {
  std::printf("transport %s (memory %s): not available here: %s\n", cfg.transport.c_str(),
              cfg.ResolvedMemory().c_str(), why.ToString().c_str());
  Doc doc = base;
  doc["outcome"] = "not-available";
  doc["reason"] = why.ToString();
  (void)WriteJsonFile(cfg.json, doc);
  return kExitUnavailable;
}

// After a stop signal: the workers are reaped, the run directory is gone and the
// document of the runs that finished is written (`written`); dies by the signal.
[[noreturn]] void Stopped(int sig, const Doc& doc, const kvlane::Status& written,
                          const std::string& json) {
  const Doc& v = doc["verification"];
  std::string what =
      json + (doc.contains("stopped_by") ? " holds them, marked stopped" : " is complete");
  if (!written.ok()) what = "no document written: " + written.ToString();
  std::fprintf(stderr, "lanebench: stopped by %s (%s) after %d of %d runs; %s\n",
               SignalName(sig).c_str(), strsignal(sig), v["runs"].get<int>(),
               v["runs_planned"].get<int>(), what.c_str());
  DieBy(sig);
}

int RunBench(const BenchConfig& cfg, const std::string& command) {
  CatchStopSignals();
  const std::vector<Case> cases = BuildCases(cfg);
  const Doc env = kvlane_tools::HostEnvironment();
  const Doc base = BuildDocument(cfg, cases, {}, command, env);
  PrintPreamble(base, stdout);
  std::fflush(stdout);
  if (const int64_t n = PlannedRunIterations(cfg, cases.size()); n > kManyRunIterations)
    std::fprintf(stderr,
                 "lanebench: warning: %zu runs x %d measured iterations keep every iteration's "
                 "samples in memory and in the JSON: about %.1f GB and %.1f GB "
                 "(fewer --iters, --pairs or cases keep it smaller)\n",
                 PlannedRuns(cfg, cases.size()), cfg.iters, n * double(kRunIterationMemory) / 1e9,
                 n * double(kRunIterationJson) / 1e9);
  if (kvlane::Status s = ProbeTransport(cfg); !s.ok()) return Unavailable(cfg, base, s);
  // Pinned: this process (it spawns and waits for the workers) stays off the poller's CPU too.
  if (!cases.empty() && cases.front().spec.poller_cpu >= 0) {
    if (kvlane::Status s = RunOn(cases.front().spec.worker_cpus); !s.ok())
      std::fprintf(stderr, "lanebench: warning: the orchestrator stays where it was: %s\n",
                   s.ToString().c_str());
  }
  const std::vector<RunRecord> records = RunPlan(cfg, cases);
  const int sig = StopSignal();  // a later stop finds the document whole; it ends below too
  Doc end_env = env;
  end_env["loadavg_end"] = kvlane_tools::LoadAverage();
  Doc doc = BuildDocument(cfg, cases, records, command, end_env);
  if (sig != 0 && !doc["complete"].get<bool>()) MarkStopped(&doc, SignalName(sig));
  kvlane::Status w = WriteJsonFile(cfg.json, doc);
  PrintResults(doc, stdout);
  std::printf("json: %s%s\n", cfg.json.c_str(),
              w.ok() ? "" : (" NOT WRITTEN: " + w.ToString()).c_str());
  if (int late = StopSignal(); late != 0) Stopped(late, doc, w, cfg.json);
  return doc["outcome"] == "ok" && w.ok() ? 0 : kExitInvalid;
}

}  // namespace
}  // namespace lanebench

int main(int argc, char** argv) {
  using namespace lanebench;
  CLI::App app{"lanebench: completion isolation between lanes, global-fifo vs independent"};
  app.set_version_flag("--version", kvlane::VersionString());
  app.footer(
      "exit codes: 0 ok, 1 a run failed or did not verify (or the JSON was not written), 2 bad "
      "flags or an unwritable --json, 77 not available");
  BenchConfig cfg;
  AddBenchFlags(app, cfg);
  std::string role = "bench", dir;
  int index = 0;
  app.add_option("--role", role)->group("");  // worker roles: fork+exec'd by the orchestrator
  app.add_option("--dir", dir)->group("");
  app.add_option("--index", index)->group("");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (role == "target") return RunTarget(dir, index);
  if (role == "source") return RunSource(dir);
  if (kvlane::Status s = cfg.Validate(); !s.ok()) {
    std::fprintf(stderr, "lanebench: %s\n", s.message().c_str());
    return 2;
  }
  // Before any measurement: a document that cannot be written is found now, not at the end.
  if (kvlane::Status s = CheckWritable(cfg.json); !s.ok()) {
    std::fprintf(stderr, "lanebench: --json %s: %s\n", cfg.json.c_str(), s.message().c_str());
    return 2;
  }
  return RunBench(cfg, kvlane_tools::CommandLine());
}
