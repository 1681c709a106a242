// The source role: posts every iteration's transfers, times each from just
// before Post() to the first Check() that reports it finished, and checks every
// payload against the oracle outside the timed region (source_payload.h).
#include <fmt/format.h>

#include <cstdio>
#include <thread>

#include "fault.h"
#include "source_payload.h"
#include "source_rig.h"
#include "stall_probe.h"
#include "timed.h"
#include "worker.h"

namespace lanebench {
namespace {

using Clock = std::chrono::steady_clock;

// What one run gathered: every measured iteration's samples, per transfer, and
// the counts. Written into the result whatever ends the run.
struct Tally {
  std::vector<std::vector<double>> lat, done, post, stall;
  std::vector<std::vector<uint32_t>> sweep;
  std::vector<double> window, gap;
  int64_t verified = 0, warmup_verified = 0, failed = 0;
  explicit Tally(size_t n) : lat(n), done(n), post(n), stall(n), sweep(n) {}
  void Add(const IterTimes& t) {
    for (size_t i = 0; i < sweep.size(); ++i) {
      sweep[i].push_back(t.sweep[i]);
      lat[i].push_back(t.lat_us[i]);
      done[i].push_back(t.done_us[i]);
      post[i].push_back(t.post_us[i]);
      stall[i].push_back(t.stall_us[i]);
    }
    window.push_back(t.window_us);
    gap.push_back(t.gap_us);
  }
  void WriteTo(const SourceRig& rig, nlohmann::json& out) const {
    out["iterations"] = rig.spec.iters;
    out["verified"] = verified;
    out["warmup_verified"] = warmup_verified;
    out["failed"] = failed;
    if (!out.contains("failed_iterations")) out["failed_iterations"] = nlohmann::json::array();
    for (size_t i = 0; i < rig.xfers.size(); ++i) {
      const std::string& name = rig.xfers[i].spec.name;
      out["lat_us"][name] = lat[i];
      out["done_us"][name] = done[i];
      out["done_sweep"][name] = sweep[i];
      out["post_us"][name] = post[i];
      out["stall_us"][name] = stall[i];
    }
    out["window_us"] = window;
    // Idle time before each measured iteration (staging, verification): read
    // beside lat_us, it tells slow iterations that followed a long pause (lanes
    // asleep, a proxy that exited) from the rest.
    out["gap_us"] = gap;
  }
};

// "measured iteration 3 (epoch 4)": an iteration as failures name it.
std::string IterationName(bool measured, int64_t index, uint64_t epoch) {
  return std::string(measured ? "measured" : "warm-up") + " iteration " + std::to_string(index) +
         " (epoch " + std::to_string(epoch) + ")";
}

// An error that ended the run in iteration `it`, named; past the source's deadline
// (whatever wait ran out) it says which deadline that was.
kvlane::Status InIteration(const SourceRig& rig, const std::string& it, const kvlane::Status& s) {
  std::string m = it + ": " + s.message();
  if (s.code() == kvlane::Code::kTimeout && Clock::now() >= rig.deadline)
    m += fmt::format(" (--timeout {:g} s, less {:g} s for the source to write its result)",
                     rig.spec.timeout_s, SourceMargin(rig.spec).count() / 1e3);
  return {s.code(), m};
}

// After the timed region of `epoch` (`measured`: its measured index, from 1; 0 for a
// warm-up one): "" when every payload verified, else the first failure. Outside the
// timed region, with --inject-fault's fault at its place.
kvlane::Result<std::string> CheckIteration(SourceRig& rig, uint64_t epoch, int64_t measured) {
  const FaultSpec& fault = rig.spec.fault;
  const bool faulty = measured > 0 && measured == fault.iteration;
  if (faulty && fault.kind == "flip-byte")  // landed, unchecked
    KVLANE_RETURN_IF_ERROR(FlipOneReceivedByte(rig, epoch));
  KVLANE_ASSIGN_OR_RETURN(std::string failure, Overwrite(rig, epoch));
  if (faulty && fault.kind == "repost")  // moved again, after completion and the overwrite
    KVLANE_RETURN_IF_ERROR(RepostAll(rig));
  KVLANE_ASSIGN_OR_RETURN(std::string late, Verify(rig, epoch));
  return failure.empty() ? late : failure;
}

// One iteration: staged, timed, checked; its samples into `tally` when it verified.
kvlane::Status Iteration(SourceRig& rig, int64_t it, Clock::time_point* last_done, Tally& tally,
                         nlohmann::json& out) {
  const uint64_t epoch = static_cast<uint64_t>(it) + 1;
  const bool measured = it >= rig.spec.warmup;
  const int64_t index = measured ? it - rig.spec.warmup + 1 : it + 1;  // from 1, in its kind
  const std::string name = IterationName(measured, index, epoch);
  auto named = [&](const kvlane::Status& s) { return InIteration(rig, name, s); };
  if (kvlane::Status s = Stage(rig, epoch); s.is_error()) return named(s);
  if (rig.spec.idle_us > 0 && *last_done != Clock::time_point{})  // equal idle before every case
    std::this_thread::sleep_until(*last_done + std::chrono::microseconds(rig.spec.idle_us));
  if (measured && index == rig.spec.fault.iteration && rig.spec.fault.kind == "stop-peer") {
    if (kvlane::Status s = StopPeer(rig); s.is_error()) return named(s);
  }
  if (Clock::now() >= rig.deadline)  // a transfer that times out below was open at the deadline
    return named(kvlane::Status::Timeout("the source's deadline passed before its timed region"));
  kvlane::Result<IterTimes> t = TimedIteration(rig, last_done);
  if (!t.ok()) return named(t.status());
  kvlane::Result<std::string> failure = CheckIteration(rig, epoch, measured ? index : 0);
  if (!failure.ok()) return named(failure.status());
  if (!failure->empty()) {
    if (tally.failed++ == 0) out["first_failure"] = name + ": " + failure.value();
    if (measured) out["failed_iterations"].push_back(index);
    return kvlane::Status::Ok();
  }
  (measured ? tally.verified : tally.warmup_verified)++;
  if (measured) tally.Add(t.value());
  return kvlane::Status::Ok();
}

// Every iteration; the samples gathered go into `out` however the run ends.
kvlane::Status RunIterations(SourceRig& rig, nlohmann::json& out) {
  const int64_t total = int64_t{rig.spec.warmup} + rig.spec.iters;
  Tally tally(rig.xfers.size());
  Clock::time_point last_done{};
  kvlane::Status s;
  for (int64_t it = 0; it < total && s.ok(); ++it) s = Iteration(rig, it, &last_done, tally, out);
  tally.WriteTo(rig, out);
  return s;
}

// Writes result.json once, while the agent is still alive, so that a slow
// teardown cannot lose the measurements.
void Finish(const std::string& dir, nlohmann::json& out, const kvlane::Status& s) {
  if (out.value("written", false)) return;
  out["ok"] = s.ok() && out.value("failed", 0) == 0;
  if (!s.ok()) out["error"] = s.ToString();
  out["written"] = WriteJsonFile(ResultPath(dir), out).ok();
}

kvlane::Status Drive(const std::string& dir, nlohmann::json& out) {
  KVLANE_ASSIGN_OR_RETURN(RunSpec spec, ReadSpec(dir));
  if (spec.xfers.empty() || spec.xfers.size() > kMaxXfers)
    return kvlane::Status::InvalidArgument("a run needs 1..4 transfers");
  KVLANE_RETURN_IF_ERROR(EnterWorkerCpus(spec));  // before any thread starts (CUDA's too)
  KVLANE_ASSIGN_OR_RETURN(auto rig, SetUpSource(spec, dir));
  out["transport"] = rig->transport;
  if (spec.poller_cpu >= 0) {  // from here this thread posts and polls, alone on its CPU
    KVLANE_RETURN_IF_ERROR(RunOn({spec.poller_cpu}));
    out["poller_cpu"] = spec.poller_cpu;
  }
  if (spec.stall_probe_ms > 0)  // on the polling thread's CPU, before any transfer
    out["host_stalls"] = ProbeHostStalls(std::chrono::milliseconds(spec.stall_probe_ms));
  kvlane::Status s = RunIterations(*rig, out);
  Finish(dir, out, s);  // first: a send to a target that hangs may wait for its answer
  for (size_t i = 0; i < spec.target_bytes.size(); ++i)  // best effort: the orchestrator reaps
    (void)rig->link->Send(TargetName(static_cast<int>(i)), "quit");
  return s;
}

}  // namespace

int RunSource(const std::string& dir) {
  nlohmann::json out = {{"ok", false}, {"failed", 0}};
  kvlane::Status s = Drive(dir, out);
  Finish(dir, out, s);
  if (!s.ok()) std::fprintf(stderr, "lanebench source: %s\n", s.ToString().c_str());
  return out["ok"].get<bool>() && out["written"].get<bool>() ? 0 : 1;
}

}  // namespace lanebench
