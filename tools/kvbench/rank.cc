#include "rank.h"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <iostream>

#include "common/environment.h"
#include "common/stop_signal.h"
#include "document_writer.h"
#include "plan_report.h"
#include "row_runner.h"
#include "run_report.h"
#include "session.h"
#include "target_loop.h"

namespace kvbench {
namespace {

void PrintHeader(const Session& s) {
  const Plan& p = s.plan();
  fmt::print(stderr,
             "[kvbench] {}: {} | transport {} (declared {}) | memory {} | target {} initiator {} | "
             "pool {:.2f} GiB in {} piece(s) per rank | {} row(s) x {} op(s) | warm-up {}, "
             "{} samples x {} trials\n",
             CaseName(s), kvlane::VersionString(), s.transport_used(), s.config().transport,
             MemoryName(s.path()), s.peer().hostname, s.self().hostname,
             p.layout.bytes / double(1 << 30), p.layout.pieces.size(), p.Rows(),
             s.config().ops.size(), s.config().warmup, s.config().samples, s.config().trials);
  const std::string shed = ShedSummary(PointsToJson(p));
  if (!shed.empty()) fmt::print(stderr, "[kvbench] {}\n", shed);
}

// Whether a run a stop signal cut short (a stop after its last row cut nothing)
// still writes a document: with no row finished there is nothing to keep, and an
// earlier document of the case is left as it is.
bool WriteAfterStop(const Session& s, const RunResult& result) {
  const size_t planned = PlannedRows(s.plan(), s.config().ops).size();
  if (result.stopped_by.empty() || result.rows.size() >= planned) return true;
  fmt::print(stderr, "[kvbench] stopped by {} on the {} after {} of {} row(s){}\n",
             result.stopped_by, result.stopped_rank, result.rows.size(), planned,
             result.rows.empty() ? ": no document written (nothing to keep)"
                                 : "; the rows that finished go to the document");
  return !result.rows.empty();
}

int RunInitiator(Session* s) {
  PrintHeader(*s);
  if (s->config().staging_copy != "batch" && StagingName(s->path()) == "none") {
    fmt::print(stderr,
               "[kvbench] --staging-copy {}: no rank stages on this path (only tcp with a device "
               "pool does), so it changes nothing; the document records staging_copy none\n",
               s->config().staging_copy);
  }
  DocumentWriter writer(s, kvlane_tools::HostEnvironment());
  RunResult result;
  try {
    RowRunner runner(s);
    result = runner.RunAll([&writer](const RunResult& so_far) {
      fmt::print(stderr, "{}\n", ProgressLine(so_far.rows.back()));
      writer.Checkpoint(so_far);  // between rows: off every timed burst
    });
  } catch (const nlohmann::json::exception& e) {  // RunRank says it on stderr too
    writer.EndWithError(std::string("a control message of an unexpected shape: ") + e.what());
    throw;
  }
  // Nothing to keep: no row finished, so no checkpoint was written either.
  if (!WriteAfterStop(*s, result)) return kExitInvalid;
  CaseDocument doc = writer.Final(result);
  auto path = writer.Write(doc);
  PrintSummaryTable(doc, std::cout);
  std::cout.flush();
  if (!path.ok()) {
    fmt::print(stderr, "kvbench: {}\n", path.status().message());
    writer.EndWithError("writing the final document failed: " + path.status().message());
    return kExitError;
  }
  // A second run into the same --out with the same case name replaces the first's.
  fmt::print(stderr, "[kvbench] wrote {}{}{}\n", path->path,
             doc.completeness.complete ? "" : " (partial, marked \"complete\": false)",
             path->replaced ? " (replaced an earlier document)" : "");
  const bool valid = doc.invalid_reasons.empty() && doc.completeness.complete;
  return valid ? kExitValid : kExitInvalid;
}

int RunOpenedRank(const RunConfig& config) {
  auto session = Session::Open(config);
  if (!session.ok()) {
    fmt::print(stderr, "kvbench rank {}: {}\n", config.rank, session.status().message());
    return kExitError;
  }
  // From here a stop signal ends the run promptly, the rows that finished kept; before, it ended
  // this rank at once (nothing measured yet). A second stop ends a rank at once, or is left to the
  // launcher that spawned it.
  kvlane_tools::CatchStopSignals(config.spawned ? kvlane_tools::LaterStop::kIgnore
                                                : kvlane_tools::LaterStop::kDie);
  if (config.rank == kInitiatorRank) return RunInitiator(session.value().get());
  TargetLoop loop(session.value().get());
  kvlane::Status s = loop.Run();
  if (!s.ok()) {
    fmt::print(stderr, "kvbench rank 0 (target): {}\n", s.message());
    return kExitError;
  }
  // A stop of this rank itself: it dies by the signal (cmd_run), the initiator's document
  // says the rest.
  if (!loop.RunComplete() && kvlane_tools::StopSignal() == 0) {
    if (loop.stopped_by().empty()) {
      fmt::print(stderr,
                 "kvbench rank 0 (target): the run ended before its last row (an error: the "
                 "initiator's document says why): partial\n");
    } else {
      fmt::print(stderr,
                 "kvbench rank 0 (target): the run stopped before its last row ({} on the {}): "
                 "partial\n",
                 loop.stopped_by(),
                 loop.stopped_rank().empty() ? "initiator" : loop.stopped_rank());
    }
    return kExitInvalid;
  }
  if (!loop.RunValid()) {
    fmt::print(stderr,
               "kvbench rank 0 (target): the run is INVALID (the initiator's document says why)\n");
    return kExitInvalid;
  }
  return kExitValid;
}

}  // namespace

int RunRank(const RunConfig& config) {
  // The peer's messages are read field by field with defaults; one whose field has
  // another type than its sender writes ends this rank with an error, not an abort.
  try {
    return RunOpenedRank(config);
  } catch (const nlohmann::json::exception& e) {
    fmt::print(stderr, "kvbench rank {}: a control message of an unexpected shape: {}\n",
               config.rank, e.what());
    return kExitError;
  }
}

}  // namespace kvbench
