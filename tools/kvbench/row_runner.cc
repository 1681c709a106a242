#include "row_runner.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "burst_check.h"
#include "burst_progress.h"
#include "common/stop_signal.h"
#include "json_field.h"
#include "reference.h"
#include "run_report.h"

namespace kvbench {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

double MsSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

std::vector<uint64_t> Shape(const PlanPoint& p) {
  std::vector<uint64_t> shape;
  for (const GroupDemand& d : p.demand) shape.push_back(d.desc_bytes);
  return shape;
}

kvlane::DescList ListAt(uint64_t base, const PoolList& list, kvlane::MemoryKind kind, int device) {
  kvlane::DescList out{kind, {}};
  out.descs.reserve(list.extents.size());
  for (const Extent& e : list.extents) out.Add(base + e.offset, e.len, device);
  return out;
}

// Whether a stop signal reached this rank: what a wait for the target asks.
bool StopSignalled() { return kvlane_tools::StopSignal() != 0; }

// The reference's reps: --samples; with --inject-fault slow-reference (testing a
// stop that comes during a long reference) as good as endless from the second row
// on (`epoch` > 1), said on stderr.
int ReferenceReps(const RunConfig& c, uint64_t epoch) {
  if (c.fault != "slow-reference" || epoch <= 1) return c.samples;
  fmt::print(stderr, "[kvbench] injected fault: the reference repeats until the run is stopped\n");
  return 1 << 30;
}

// Fails `row`, adding `why` to what its detail says already.
void AddFailure(RowResult* row, const std::string& why) {
  row->verdict = Verdict::kFail;
  row->verify_detail += (row->verify_detail.empty() ? "" : "; ") + why;
}

// The run-level error of a burst that left transfers running past its timeout and
// grace (burst.h): the pool is still in use, so no later row may wipe, fill or check
// it, and the run ends there.
std::string InFlight(const BurstTiming& t) {
  return fmt::format(
      "{} transfer(s) still in flight after the burst's timeout and grace ({}): "
      "the run stops here, its pool still in use",
      t.still_running, t.status.message());
}

std::string Describe(const VerifyResult& v) {
  return fmt::format("checked {} B, {} mismatching{}", v.checked, v.mismatches,
                     v.ok() ? "" : fmt::format(", first at pool offset {}", v.first_mismatch));
}

}  // namespace

kvlane::Op OpOf(const std::string& op) {
  return op == "push" ? kvlane::Op::kWrite : kvlane::Op::kRead;
}

RowRunner::~RowRunner() { ReleaseLists(); }

void RowRunner::ReleaseLists() {
  if (local_.valid()) (void)s_->agent().ReleasePrepared(local_);
  if (remote_.valid()) (void)s_->agent().ReleasePrepared(remote_);
  local_ = remote_ = {};
}

kvlane::Status RowRunner::PrepareLists(const PlanPoint& point, RunResult* result) {
  if (local_.valid() && Shape(point) == list_shape_) return kvlane::Status::Ok();
  ReleaseLists();
  list_ = MakePoolList(s_->plan().layout, point.demand);
  list_shape_ = Shape(point);
  Clock::time_point t0 = Clock::now();
  KVLANE_ASSIGN_OR_RETURN(
      local_, s_->agent().PrepareLocal(
                  ListAt(reinterpret_cast<uint64_t>(s_->pool()), list_, s_->kind(), s_->device())));
  KVLANE_ASSIGN_OR_RETURN(
      remote_,
      s_->agent().PrepareRemote(s_->peer_name(), ListAt(s_->remote_pool_base(), list_,
                                                        s_->peer_kind(), s_->remote_device())));
  result->list_prep_ms += MsSince(t0);
  return kvlane::Status::Ok();
}

void RowRunner::TellProgress() {
  const auto every = s_->config().progress_every_ms;
  if (progress_.row.empty() || every.count() <= 0) return;
  const Clock::time_point now = Clock::now();
  if (now < progress_.next_line) return;
  progress_.next_line = now + every;
  const RowProgress& p = progress_;
  std::string where = p.phase;
  if (p.bursts > 0) {
    where = BurstProgress(p.burst, p.warmup, p.bursts - p.warmup, MsSince(p.bursts_started) / 1000);
  }
  fmt::print(stderr, "[kvbench]   {}: {}, {:.0f} s into the row\n", p.row, where,
             MsSince(p.started) / 1000);
}

bool RowRunner::Stopping() {
  TellProgress();
  if (kvlane_tools::StopSignal() != 0 || !peer_stop_.empty() || !stop_.empty()) return true;
  if (!s_->control().Pending()) return false;
  auto m = s_->control().Receive();
  const std::string type = m.ok() ? m->value("type", "") : "";
  if (type == "busy") return false;  // the target works on its side of the row (target_loop.h)
  if (type == "stopped") {
    peer_stop_ = PeerSignal(*m);
  } else {
    StopRun(m.ok() ? "control: unexpected '" + Printable(type, 64) + "' from the target"
                   : "control: " + m.status().ToString());
  }
  return true;
}

bool RowRunner::StoppingWhileTargetWaits() {
  KeepTargetWaiting();
  return Stopping();
}

void RowRunner::KeepTargetWaiting() {
  if (Clock::now() - target_waits_since_ < s_->config().control_timeout_ms / 4) return;
  TellTargetBusy();
}

// A stop that reached both ranks (a launcher forwards its signal to both, a
// terminal's Ctrl-C reaches the whole process group) may show here first as the
// target's notice, this rank's own signal still waiting for a thread to run its
// handler on a busy host (KvbenchPromptStop once named the target so, under a
// parallel test run on two cores). A short wait for it lets such a run name the
// initiator, as it does when the signals come in order; a target stopped alone
// costs the run's end kOwnStopGrace.
void RowRunner::AwaitOwnStop() const {
  if (peer_stop_.empty() || kvlane_tools::StopSignal() != 0) return;
  const auto until = Clock::now() + kOwnStopGrace;
  while (kvlane_tools::StopSignal() == 0 && Clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

void RowRunner::TellTargetBusy() {
  target_waits_since_ = Clock::now();
  // A failure (the target gone) shows at this rank's next exchange with it.
  (void)s_->control().Send({{"type", "busy"}});
}

BurstTiming RowRunner::RunBurst(Burst* burst) {
  // The target waits through the whole burst, its grace included (burst.h).
  return burst->Run(
      s_->config().control_timeout_ms, [this] { return Stopping(); },
      [this] { KeepTargetWaiting(); });
}

RunResult RowRunner::RunAll(const Progress& progress) {
  RunResult result;
  RunPoints(progress, &result);
  AwaitOwnStop();
  if (const int sig = kvlane_tools::StopSignal(); sig != 0) {
    result.stopped_by = kvlane_tools::SignalName(sig);
    result.stopped_rank = "initiator";
  } else if (!peer_stop_.empty()) {
    result.stopped_by = peer_stop_;
    result.stopped_rank = "target";
  }
  if (!stop_.empty()) {  // the target has stopped, or is told to by the aborted connection
    result.errors.push_back(stop_);
    return result;
  }
  // The rows' verdict and the errors so far (the document's reasons), and whether
  // every planned row ran (a stop of this rank cut the run short): the target exits
  // by them too.
  const bool complete = CompletenessOf(PlannedRows(s_->plan(), s_->config().ops), result.rows,
                                       result.stopped_by, result.stopped_rank)
                            .complete;
  kvlane::Status bye = s_->control().Send({{"type", "done"},
                                           {"valid", InvalidReasons(result).empty()},
                                           {"complete", complete},
                                           {"stopped_by", result.stopped_by},
                                           {"stopped_rank", result.stopped_rank}});
  if (bye.ok()) bye = ReceiveUntil("bye");
  if (!bye.ok()) result.errors.push_back("control: " + bye.ToString());
  return result;
}

void RowRunner::RunPoints(const Progress& progress, RunResult* result) {
  uint64_t epoch = 0;
  for (const PlanPoint& point : s_->plan().points) {
    if (point.batches.empty()) continue;
    kvlane::Status s = PrepareLists(point, result);
    if (!s.ok()) {
      result->errors.push_back("preparing the pool lists: " + s.ToString());
      return;
    }
    for (uint64_t batch : point.batches) {
      BurstMap map = MakeBurstMap(list_, point.demand, batch, s_->config().seed);
      for (const std::string& op : s_->config().ops) {
        if (Stopping()) return;
        std::optional<RowResult> row = RunRow(op, point, map, ++epoch);
        if (!row.has_value()) {  // a stop came while it ran: dropped
          if (stop_.empty()) Abandon();
          return;
        }
        result->rows.push_back(std::move(*row));
        TellTargetBusy();  // `progress` (a checkpoint's write) gets a whole control timeout
        progress(*result);
        KeepTargetWaiting();  // the target waited for the next row through `progress` too
        if (!stop_.empty()) return;
      }
      kvlane::Status peer = s_->agent().PeerError(s_->peer_name());
      if (!peer.ok()) {
        result->errors.push_back("peer connection failed: " + peer.ToString());
        return;
      }
    }
  }
}

// Checks for a stop between its phases and within each: a row whose verified burst
// passed and that a stop then interrupts is dropped, not kept with part of its timing.
std::optional<RowResult> RowRunner::RunRow(const std::string& op, const PlanPoint& point,
                                           const BurstMap& map, uint64_t epoch) {
  RowResult row;
  row.op = op;
  row.isl = point.isl;
  row.batch = map.target.size();
  row.descs = point.descs;
  row.req_bytes = point.req_bytes;
  Clock::time_point t0 = Clock::now();
  progress_ = {fmt::format("{} isl {} batch {}", op, row.isl, row.batch), "making the transfers"};
  progress_.started = t0;
  progress_.next_line = t0 + s_->config().progress_every_ms;
  struct EndRow {
    RowProgress* p;
    ~EndRow() { p->row.clear(); }
  } end_row{&progress_};
  auto burst = Burst::Make(&s_->agent(), OpOf(op), local_, remote_, map);
  row.prep_ms = MsSince(t0);
  if (!burst.ok()) {
    row.verdict = Verdict::kFail;
    row.verify_detail = "MakeTransfer: " + burst.status().ToString();
    return row;
  }
  row.segments = burst.value().segments();
  progress_.phase = "the verified burst (prepare, move, check)";
  if (!VerifiedBurst(&burst.value(), op, point, map, epoch, &row)) return std::nullopt;
  if (row.verdict == Verdict::kFail) return row;
  if (Stopping() || !TimedBursts(&burst.value(), op, point, map, epoch, &row)) return std::nullopt;
  if (row.verdict == Verdict::kFail) return row;
  progress_.phase = "the reference";
  if (Stopping() || !Reference(op, point, map, epoch, &row)) return std::nullopt;
  return row;
}

std::optional<nlohmann::json> RowRunner::Answer(const std::vector<std::string>& types,
                                                RowResult* row) {
  std::vector<std::string> any = types;
  any.push_back("stopped");
  any.push_back("busy");  // the target still works on its side: the wait starts over
  auto m = s_->control().ExpectOneOf(any, StopSignalled);
  while (m.ok() && m->value("type", "") == "busy")
    m = s_->control().ExpectOneOf(any, StopSignalled);
  if (!m.ok() && m.status().code() == kvlane::Code::kCanceled && !s_->control().aborted()) {
    return std::nullopt;  // this rank was stopped while it waited
  }
  if (!m.ok()) {
    const std::string why = "control: " + m.status().ToString();
    AddFailure(row, why);
    // The target may still answer this row later ('busy', then 'ready'), which the
    // next row would take for its own: the run ends here.
    StopRun(why);
    return json::object();
  }
  target_waits_since_ = Clock::now();  // it waits for this rank's next message from here
  if (m->value("type", "") != "stopped") return std::move(m).value();
  peer_stop_ = PeerSignal(*m);
  return std::nullopt;
}

bool RowRunner::VerifiedBurst(Burst* burst, const std::string& op, const PlanPoint& point,
                              const BurstMap& map, uint64_t epoch, RowResult* row,
                              BurstTiming* timing) {
  kvlane::Status s = s_->control().Send(
      {{"type", "row"},
       {"op", op},
       {"isl", point.isl},
       {"batch", row->batch},
       {"epoch", epoch},
       // How long this rank waits for the target's answers: its "busy" comes more often.
       {"control_timeout_ms", s_->config().control_timeout_ms.count()}});
  if (!s.ok()) {
    row->verdict = Verdict::kFail;
    row->verify_detail = "control: " + s.ToString();
    return true;
  }
  // The target wiped or filled its side; or, stopped by a signal, says so.
  if (!Answer({"ready"}, row).has_value()) return false;
  if (row->verdict == Verdict::kFail) return true;
  std::string detail;
  BurstTiming t;
  std::optional<LocalCheck> mine = LandAndCheck(burst, op == "push", map, epoch, &detail, &t);
  if (timing != nullptr) *timing = std::move(t);
  if (pool_in_use_) {  // its transfers still run: the run ends here, the row failed
    AddFailure(row, detail);
    return true;
  }
  if (!mine.has_value() || Stopping()) return false;
  return AgreeOnVerdict(*mine, detail, row);
}

std::optional<LocalCheck> RowRunner::LandAndCheck(Burst* burst, bool push, const BurstMap& map,
                                                  uint64_t epoch, std::string* detail,
                                                  BurstTiming* timing) {
  // push lands on the target (this rank is the source); pull lands here.
  PoolView pool = s_->pool_view();
  const StopCheck stop = [this] { return StoppingWhileTargetWaits(); };
  // The fault leaves the sources as the row's first burst had them: bytes that
  // are stale for this pattern.
  const bool stale = s_->config().fault == "stale-last-burst" && IsLastBurstEpoch(epoch);
  kvlane::Status s =
      push ? (stale ? kvlane::Status::Ok()
                    : FillSources(pool, list_, map.initiator, kInitiatorRank, epoch, stop))
           : WipeDestinations(pool, list_, map.initiator, stop);
  if (!s.ok() && Stopping()) return std::nullopt;
  BurstTiming& t = *timing;
  t = s.ok() ? RunBurst(burst) : BurstTiming{0, {}, s};
  if (t.abandoned) return std::nullopt;
  if (!t.status.ok()) {
    *detail = "transfer: " + t.status.ToString();
    if (t.still_running > 0) LeftRunning(t);
    return LocalCheck::kFail;
  }
  if (push) return LocalCheck::kNotVerifier;
  if (s_->config().fault == "flip-byte") s = FlipOneLandedByte(pool, list_, map.initiator);
  auto v =
      s.ok() ? VerifyDestinations(pool, list_, map.initiator, map.target, kTargetRank, epoch, stop)
             : kvlane::Result<VerifyResult>(s);
  if (!v.ok() && Stopping()) return std::nullopt;
  if (!v.ok()) {
    *detail = "initiator: cannot check: " + v.status().ToString();
    return LocalCheck::kFail;
  }
  *detail = "initiator: " + Describe(v.value());
  return v->ok() ? LocalCheck::kPass : LocalCheck::kFail;
}

bool RowRunner::AgreeOnVerdict(LocalCheck mine, const std::string& detail, RowResult* row) {
  row->verify_detail = detail;  // kept, the control failure added, when no verdict comes
  kvlane::Status s =
      s_->control().Send({{"type", "check"}, {"local", LocalCheckName(mine)}, {"detail", detail}});
  if (!s.ok()) {
    AddFailure(row, "control: " + s.ToString());
    return true;
  }
  std::optional<json> verdict = Answer({"verdict"}, row);
  if (!verdict.has_value()) return false;
  if (row->verdict == Verdict::kFail) return true;
  row->verdict =
      Combine(mine, ParseLocalCheck(TypedField<std::string>(*verdict, "local").value_or("")));
  std::string theirs = PeerText(*verdict, "detail", 512, "");
  row->verify_detail = detail + (detail.empty() || theirs.empty() ? "" : "; ") + theirs;
  return true;
}

bool RowRunner::VerifiedLastBurst(Burst* burst, const std::string& op, const PlanPoint& point,
                                  const BurstMap& map, uint64_t epoch, RowResult* row,
                                  BurstTiming* t) {
  const char* phase = progress_.phase;
  const int64_t bursts = progress_.bursts;
  progress_.phase = "the last timed burst (a fresh pattern, then checked)";
  progress_.bursts = 0;  // TellProgress says the phase, not the burst count
  const Verdict first = row->verdict;
  std::string first_detail = std::move(row->verify_detail);
  row->verify_detail.clear();
  const bool measured = VerifiedBurst(burst, op, point, map, LastBurstEpoch(epoch), row, t);
  row->verdict = Worse(first, row->verdict);
  row->verify_detail =
      first_detail + (first_detail.empty() ? "" : "; ") + "last timed burst: " + row->verify_detail;
  progress_.phase = phase;
  progress_.bursts = bursts;
  return measured;
}

bool RowRunner::TimedBursts(Burst* burst, const std::string& op, const PlanPoint& point,
                            const BurstMap& map, uint64_t epoch, RowResult* row) {
  const RunConfig& c = s_->config();
  std::vector<BurstTiming> timings;
  const int64_t total = int64_t{c.warmup} + int64_t{c.samples} * c.trials;  // Resolve bounds it
  progress_.bursts = total;  // warm-up included; TellProgress counts the warm-up apart
  progress_.warmup = c.warmup;
  progress_.bursts_started = Clock::now();
  struct EndBursts {
    RowProgress* p;
    ~EndBursts() { p->bursts = 0; }
  } end_bursts{&progress_};
  for (int64_t i = 0; i < total; ++i) {
    progress_.burst = i + 1;
    if (StoppingWhileTargetWaits()) return false;
    BurstTiming t;
    if (i + 1 < total) {
      t = RunBurst(burst);
    } else {
      if (!VerifiedLastBurst(burst, op, point, map, epoch, row, &t)) return false;
      if (row->verdict == Verdict::kFail) return true;  // its reason is in the detail
    }
    if (t.abandoned) return false;
    if (!t.status.ok()) {
      AddFailure(row, "timed burst failed: " + t.status.ToString());
      if (t.still_running > 0) LeftRunning(t);
      return true;
    }
    if (i >= c.warmup) timings.push_back(std::move(t));
  }
  std::vector<double> ms;
  for (const BurstTiming& t : timings) ms.push_back(t.total_ms);
  row->burst_ms = Summarize(ms);
  row->p50_sample = std::find(ms.begin(), ms.end(), row->burst_ms.p50) - ms.begin();
  for (BurstTiming& t : timings) row->request_ms.push_back(std::move(t.request_ms));
  uint64_t bytes = row->batch * row->req_bytes;
  row->gbps_p50 = GigabytesPerSecond(bytes, row->burst_ms.p50);
  row->gbps_p50_incl_prep = GigabytesPerSecond(bytes, row->burst_ms.p50 + row->prep_ms);
  return true;
}

bool RowRunner::Reference(const std::string& op, const PlanPoint& point, const BurstMap& map,
                          uint64_t epoch, RowResult* row) {
  const int reps = ReferenceReps(s_->config(), epoch);
  // One process reaches both sides (local, shm, cuda: both pools of one kind): copy
  // within its pool, the target waiting. A mixed pair runs over tcp only.
  if (s_->transport_used() != "tcp") {
    const StopCheck alone = [this] { return StoppingWhileTargetWaits(); };
    auto ref = s_->kind() == kvlane::MemoryKind::kCuda
                   ? DeviceCopyReference(s_->pool(), list_, map, OpOf(op), reps, alone)
                   : MemcpyReference(s_->pool(), list_, map, OpOf(op), reps, alone);
    if (!ref.has_value()) return false;
    row->reference = *ref;
    // A copy that failed (a CUDA error, no scratch memory) ends the run as a failed
    // socket reference does: a 0 GB/s reference beside a passing row says nothing.
    if (ref->method.ends_with("-failed"))
      StopRun(fmt::format("reference ({}, isl {}, batch {}): the in-process copy failed ({})", op,
                          point.isl, row->batch, ref->method));
    return true;
  }
  const StopCheck stop = [this] { return Stopping(); };
  ControlChannel& c = s_->control();
  kvlane::Status s = c.Send(
      {{"type", "ref"}, {"op", op}, {"isl", point.isl}, {"batch", row->batch}, {"reps", reps}});
  // "ref_ready", the target's reason, or its "stopped" (told before it read "ref").
  auto ready =
      s.ok() ? c.ExpectOneOf({"ref_ready", "stopped"}, StopSignalled) : kvlane::Result<json>(s);
  if (!ready.ok() && ready.status().code() == kvlane::Code::kCanceled && !c.aborted()) {
    return false;
  }
  if (ready.ok() && ready->value("type", "") == "stopped") {
    peer_stop_ = PeerSignal(*ready);
    return false;
  }
  auto ref = ready.ok() ? SocketReferenceInitiator(
                              &c, ready.value(), s_->pool_view(), list_, map, OpOf(op), reps,
                              ReferenceFaultFor(s_->config().fault, "initiator"), stop, &peer_stop_)
                        : kvlane::Result<ReferenceFigures>(ready.status());
  if (ref.ok()) {
    row->reference = ref.value();
    return true;
  }
  if (ref.status().code() == kvlane::Code::kCanceled && !c.aborted()) return false;
  row->reference = {"socket-failed: " + ref.status().ToString(), 0, 0};
  StopRun(fmt::format("socket reference ({}, isl {}, batch {}): {}", op, point.isl, row->batch,
                      ref.status().ToString()));
  return true;
}

void RowRunner::LeftRunning(const BurstTiming& t) {
  pool_in_use_ = true;
  StopRun(InFlight(t));
}

// The target takes "abandon" wherever it is in the row (in place of the next row
// message it waits for, or once a step of its own notices it waiting) and answers
// "abandoned" from its loop; the answers it sent meanwhile are passed over.
void RowRunner::Abandon() {
  kvlane::Status s = s_->control().Send({{"type", "abandon"}});
  if (s.ok()) s = ReceiveUntil("abandoned");
  if (!s.ok()) StopRun("abandoning the row in flight: " + s.ToString());
}

kvlane::Status RowRunner::ReceiveUntil(const std::string& type) {
  while (true) {
    KVLANE_ASSIGN_OR_RETURN(json m, s_->control().ExpectOneOf({type, "stopped", "ready", "verdict",
                                                               "ref_ready", "ref_done", "busy"}));
    const std::string got = m.value("type", "");
    if (got == type) return kvlane::Status::Ok();
    if (got == "stopped" && peer_stop_.empty()) peer_stop_ = PeerSignal(m);
  }
}

// A failed socket reference ends the run (the target has stopped, or the raw bytes
// no longer line up): tells the target why (refused once the connection is
// aborted), then aborts it, so that neither rank waits for the other.
void RowRunner::StopRun(const std::string& reason) {
  ControlChannel& c = s_->control();
  (void)c.Send({{"type", "error"}, {"message", reason}});
  c.Abort();
  stop_ = reason;
}

}  // namespace kvbench
