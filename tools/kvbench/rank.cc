#include "rank.h"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <iostream>

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
}

int RunInitiator(Session* s) {
  PrintHeader(*s);
  RunResult result;
  {
    RowRunner runner(s);
    result = runner.RunAll([](const RowResult& r) { fmt::print(stderr, "{}\n", ProgressLine(r)); });
  }
  CaseDocument doc = BuildDocument(*s, result);
  auto path = WriteDocument(doc, s->config().out_dir);
  PrintSummaryTable(doc, std::cout);
  std::cout.flush();
  if (!path.ok()) {
    fmt::print(stderr, "kvbench: {}\n", path.status().message());
    return kExitError;
  }
  // A second run into the same --out with the same case name replaces the first's.
  fmt::print(stderr, "[kvbench] wrote {}{}\n", path->path,
             path->replaced ? " (replaced an earlier document)" : "");
  return doc.invalid_reasons.empty() ? kExitValid : kExitInvalid;
}

}  // namespace

int RunRank(const RunConfig& config) {
  auto session = Session::Open(config);
  if (!session.ok()) {
    fmt::print(stderr, "kvbench rank {}: {}\n", config.rank, session.status().message());
    return kExitError;
  }
  if (config.rank == kInitiatorRank) return RunInitiator(session.value().get());
  kvlane::Status s = TargetLoop(session.value().get()).Run();
  if (!s.ok()) fmt::print(stderr, "kvbench rank 0 (target): {}\n", s.message());
  return s.ok() ? kExitValid : kExitError;
}

}  // namespace kvbench
