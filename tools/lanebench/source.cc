// The source role: posts every iteration's transfers, times each from just
// before Post() to the first Check() that reports it finished, and checks every
// payload against the oracle outside the timed region (source_payload.h).
#include <array>
#include <cstdio>
#include <thread>

#include "fault.h"
#include "source_payload.h"
#include "source_rig.h"
#include "stall_probe.h"
#include "worker.h"

namespace lanebench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kMaxXfers = 4;

struct IterTimes {
  std::array<double, kMaxXfers> lat_us{};   // own post to own completion
  std::array<double, kMaxXfers> done_us{};  // first post to own completion
  std::array<uint32_t, kMaxXfers> sweep{};  // Check() sweep that saw it done
  std::array<double, kMaxXfers> post_us{};  // inside its own Post() call
  // The longest the polling thread went without a look (Post() calls aside)
  // between its own Post() returning and its completion being seen.
  std::array<double, kMaxXfers> stall_us{};
  double window_us = 0;  // first post to last completion
  double gap_us =
      -1;  // previous iteration's last completion to this first post; -1: none before it
};

double Us(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

using Stamps = std::array<Clock::time_point, kMaxXfers>;
using Sweeps = std::array<uint32_t, kMaxXfers>;
using Gaps = std::array<Clock::duration, kMaxXfers>;

// The polling thread's own timeline: every look at the clock between the
// transfers' Post() calls and their completions. A long gap between two looks
// is time this thread did not run (preempted, interrupted), not engine time:
// Post() calls are left out, and a sweep of Check() calls is a few host-memory
// reads.
class Looks {
 public:
  explicit Looks(size_t n) : n_(n) {}
  // Transfer i's Post() returned at `now`: its watch starts. The time since
  // the last look was spent inside Post(), the engine's time: not a gap.
  void PostReturned(size_t i, Clock::time_point now) {
    prev_ = now;
    watching_[i] = true;
  }
  void Look(Clock::time_point now) {
    if (prev_ != Clock::time_point{}) {
      const Clock::duration gap = now - prev_;
      for (size_t i = 0; i < n_; ++i)
        if (watching_[i] && gap > longest_[i]) longest_[i] = gap;
    }
    prev_ = now;
  }
  void Finished(size_t i) { watching_[i] = false; }
  const Gaps& longest() const { return longest_; }

 private:
  size_t n_;
  Clock::time_point prev_{};
  std::array<bool, kMaxXfers> watching_{};
  Gaps longest_{};
};

// Polls Check() on every open transfer, the latest post first, until all are
// terminal; yields the CPU only after a sweep that saw nothing finish. done[i]
// is when transfer i was first seen terminal, sweep[i] in which sweep. Under
// global-fifo an earlier post is published first, so it is seen in the same
// sweep as a later one at the latest: a lower sweep is a real "done first".
kvlane::Status AwaitAll(SourceRig& rig, Stamps& done, Sweeps& sweep, Looks& looks) {
  std::array<bool, kMaxXfers> finished{};
  size_t left = rig.xfers.size();
  for (uint32_t k = 0; left > 0; ++k) {
    const size_t before = left;
    looks.Look(Clock::now());
    for (size_t i = rig.xfers.size(); i-- > 0;) {
      if (finished[i]) continue;
      kvlane::Status s = rig.agent->Check(rig.xfers[i].handle);
      if (s.in_progress()) continue;
      done[i] = Clock::now();
      looks.Look(done[i]);
      looks.Finished(i);
      if (s.is_error()) return s;
      finished[i] = true;
      sweep[i] = k;
      --left;
    }
    if (left == before) std::this_thread::yield();  // the lanes' threads may share this core
  }
  return kvlane::Status::Ok();
}

// The timed region: post every transfer in order, then await them all.
// `*last_done`: the previous iteration's last completion (in), this one's (out).
kvlane::Result<IterTimes> TimedIteration(SourceRig& rig, Clock::time_point* last_done) {
  Stamps post{}, posted{}, done{};
  Sweeps sweep{};
  Looks looks(rig.xfers.size());
  for (size_t i = 0; i < rig.xfers.size(); ++i) {
    post[i] = Clock::now();
    looks.Look(post[i]);
    KVLANE_RETURN_IF_ERROR(rig.agent->Post(&rig.xfers[i].handle));
    posted[i] = Clock::now();
    looks.PostReturned(i, posted[i]);
  }
  KVLANE_RETURN_IF_ERROR(AwaitAll(rig, done, sweep, looks));
  IterTimes t;
  Clock::time_point last = post[0];
  for (size_t i = 0; i < rig.xfers.size(); ++i) {
    t.lat_us[i] = Us(done[i] - post[i]);
    t.done_us[i] = Us(done[i] - post[0]);
    t.post_us[i] = Us(posted[i] - post[i]);
    t.stall_us[i] = Us(looks.longest()[i]);
    t.sweep[i] = sweep[i];
    last = std::max(last, done[i]);
  }
  t.window_us = Us(last - post[0]);
  t.gap_us = *last_done == Clock::time_point{} ? -1 : Us(post[0] - *last_done);
  *last_done = last;
  return t;
}

// The measured samples of one run, per transfer.
struct Samples {
  std::vector<std::vector<double>> lat, done, post, stall;
  std::vector<std::vector<uint32_t>> sweep;
  std::vector<double> window, gap;
  explicit Samples(size_t n) : lat(n), done(n), post(n), stall(n), sweep(n) {}
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
};

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

kvlane::Status RunIterations(SourceRig& rig, nlohmann::json& out) {
  const int64_t total = int64_t{rig.spec.warmup} + rig.spec.iters;
  Samples samples(rig.xfers.size());
  int64_t verified = 0, warmup_verified = 0, failed = 0;
  Clock::time_point last_done{};
  for (int64_t it = 0; it < total; ++it) {
    const uint64_t epoch = static_cast<uint64_t>(it) + 1;
    KVLANE_RETURN_IF_ERROR(Stage(rig, epoch));
    if (rig.spec.idle_us > 0 && last_done != Clock::time_point{})  // equal idle before every case
      std::this_thread::sleep_until(last_done + std::chrono::microseconds(rig.spec.idle_us));
    KVLANE_ASSIGN_OR_RETURN(IterTimes t, TimedIteration(rig, &last_done));
    const bool measured = it >= rig.spec.warmup;
    const int64_t index = measured ? it - rig.spec.warmup + 1 : it + 1;  // from 1, in its kind
    KVLANE_ASSIGN_OR_RETURN(std::string failure, CheckIteration(rig, epoch, measured ? index : 0));
    if (!failure.empty()) {
      if (failed++ == 0)
        out["first_failure"] = std::string(measured ? "measured" : "warm-up") + " iteration " +
                               std::to_string(index) + " (epoch " + std::to_string(epoch) +
                               "): " + failure;
      if (measured) out["failed_iterations"].push_back(index);
      continue;
    }
    (measured ? verified : warmup_verified)++;
    if (measured) samples.Add(t);
  }
  out["iterations"] = rig.spec.iters;
  out["verified"] = verified;
  out["warmup_verified"] = warmup_verified;
  out["failed"] = failed;
  if (!out.contains("failed_iterations")) out["failed_iterations"] = nlohmann::json::array();
  for (size_t i = 0; i < rig.xfers.size(); ++i) {
    out["lat_us"][rig.xfers[i].spec.name] = samples.lat[i];
    out["done_us"][rig.xfers[i].spec.name] = samples.done[i];
    out["done_sweep"][rig.xfers[i].spec.name] = samples.sweep[i];
    out["post_us"][rig.xfers[i].spec.name] = samples.post[i];
    out["stall_us"][rig.xfers[i].spec.name] = samples.stall[i];
  }
  out["window_us"] = samples.window;
  // Idle time before each measured iteration (staging, verification): read
  // beside lat_us, it tells slow iterations that followed a long pause (lanes
  // asleep, a proxy that exited) from the rest.
  out["gap_us"] = samples.gap;
  return kvlane::Status::Ok();
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
  for (size_t i = 0; i < spec.target_bytes.size(); ++i)  // best effort: the orchestrator reaps
    (void)rig->link->Send(TargetName(static_cast<int>(i)), "quit");
  Finish(dir, out, s);
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
