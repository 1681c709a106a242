#include "run_report.h"

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "atomic_file.h"
#include "case_name.h"
#include "grid_flags.h"
#include "plan_report.h"

namespace kvbench {
namespace {

using nlohmann::json;

// "kvlane 0.1.0 (git abcdef)" -> "abcdef".
std::string GitRevision(const std::string& version) {
  size_t at = version.find("(git ");
  if (at == std::string::npos) return "unknown";
  size_t end = version.find(')', at);
  return version.substr(at + 5, end == std::string::npos ? std::string::npos : end - at - 5);
}

// The GPU of rank `rank`'s device pool (the document is written on either rank).
int RankDevice(const Session& s, int rank) {
  return rank == s.config().rank ? s.device() : s.remote_device();
}

std::string DeviceFilter(const Session& s) {
  const DataPath& p = s.path();
  if (p.target == kvlane::MemoryKind::kHost && p.initiator == kvlane::MemoryKind::kHost) {
    return "none: host memory pool, no NIC or GPU selection applied";
  }
  auto gpu = [&](int rank) {
    return p.Of(rank) == kvlane::MemoryKind::kCuda ? std::to_string(RankDevice(s, rank))
                                                   : std::string("none (host pool)");
  };
  return fmt::format("cuda devices: target {}, initiator {}", gpu(kTargetRank),
                     gpu(kInitiatorRank));
}

// Each rank's pool memory, its staging and, for a device pool, its GPU (document
// version 3): {"target": {...}, "initiator": {...}}.
json PerRank(const Session& s) {
  json out = json::object();
  for (int rank : {kTargetRank, kInitiatorRank}) {
    json r = {{"memory", MemoryFlagName(s.path().Of(rank))},
              {"staging", StagingName(s.path(), rank)}};
    if (s.path().Of(rank) == kvlane::MemoryKind::kCuda) r["device"] = RankDevice(s, rank);
    out[rank == kTargetRank ? "target" : "initiator"] = std::move(r);
  }
  return out;
}

json BoundJson(const MemoryBound& b) {
  return {{"bytes", b.bytes}, {"description", b.description}};
}

// The pool, its budget, and the host memory bounds: this rank's, and where the ranks
// share a host, the one both host pools were checked against together.
json Pool(const Session& s) {
  json pool = {{"memory", MemoryName(s.path())},
               {"pinned", false},
               {"bytes", s.plan().layout.bytes},
               {"budget", s.plan().options.pool_budget},
               {"budget_source", s.budget_source()},
               {"host_memory_bound", BoundJson(s.host_bound())},  // as read at the plan
               {"pieces", s.plan().layout.pieces.size()},
               {"register_ms", s.register_ms()}};
  if (s.shared_bound()) pool["shared_host_memory_bound"] = BoundJson(*s.shared_bound());
  return pool;
}

json Implementation(const Session& s, const RunResult& result) {
  const kvlane::AgentOptions& o = s.agent().options();
  std::string version = kvlane::VersionString();
  return {{"backend", "kvlane"},
          {"transport", s.transport_used()},
          {"transport_declared", s.config().transport},
          {"transport_resolved", s.transport_resolved()},
          {"memory", MemoryName(s.path())},
          {"memory_declared", s.config().memory},
          {"staging", StagingName(s.path())},
          // The copier only where a rank stages: elsewhere --staging-copy moves nothing.
          {"staging_copy",
           StagingName(s.path()) != "none" ? kvlane::StagingCopyName(o.staging_copy) : "none"},
          {"per_rank", PerRank(s)},
          {"lanes", o.lanes_per_peer},
          {"policy", kvlane::PolicyName(o.policy)},
          {"chunk_bytes", o.chunk_bytes},
          {"library_version", version},
          {"git_revision", GitRevision(version)},
          {"device_filter", DeviceFilter(s)},
          {"pool", Pool(s)},
          {"list_prep_ms", result.list_prep_ms},
          {"seed", s.config().seed},
          // Whether the ranks proved a shared control secret (--secret-file, or the
          // launcher's own for ranks it spawned); never the secret.
          {"control_auth", s.config().secret.empty() ? "none" : "shared secret"}};
}

// The boot ids decide where both ranks told theirs (Session::same_host), else the
// host names.
std::string Link(const Session& s) {
  const bool same_host = s.same_host().value_or(s.self().hostname == s.peer().hostname);
  if (!same_host) return "network";
  return s.transport_used() == "local" ? "same-process" : "same-host";
}

}  // namespace

std::string CaseName(const Session& s) {
  const RunConfig& c = s.config();
  if (!c.case_name.empty()) return c.case_name;
  // The staging copy names the case only where a rank stages (elsewhere it moves nothing).
  const bool stages = StagingName(s.path()) != "none";
  const GridPreset preset = GridPresetNamed(c.grid.preset).value();  // Resolve checked the name
  const auto& w = s.plan().workload;
  return DefaultCaseName(
      {.workload = w.name(),
       .block = w.block(),
       .dtype = w.dtype(),
       .path = PathLabel(s.transport_used(), MemoryName(s.path())),
       .staging_copy = stages ? kvlane::StagingCopyName(s.agent().options().staging_copy) : "",
       .policy = c.policy,
       .lanes = c.lanes,
       .grid = c.grid.preset,
       .isl = ChangedLadder(c.grid.isl, preset.isl),
       .batches = ChangedLadder(c.grid.batches, preset.batches),
       .ops = c.ops});
}

std::string ProgressLine(const RowResult& r) {
  return fmt::format(
      "[kvbench] {:<4} isl {:>6} batch {:>2}: p50 {:8.3f} ms  {:7.2f} GB/s  "
      "(ref {} {:.2f} GB/s)  prep {:.3f} ms  verified {}",
      r.op, r.isl, r.batch, r.burst_ms.p50, r.gbps_p50, r.reference.method, r.reference.gbps_p50,
      r.prep_ms, VerdictName(r.verdict));
}

std::vector<std::string> InvalidReasons(const RunResult& result) {
  std::vector<std::string> reasons = result.errors;
  for (const RowResult& r : result.rows) {
    if (r.verdict == Verdict::kPass) continue;
    reasons.push_back(fmt::format("row {} isl {} batch {}: {} ({})", r.op, r.isl, r.batch,
                                  VerdictName(r.verdict), r.verify_detail));
  }
  if (result.rows.empty()) reasons.push_back("no row was measured");
  return reasons;
}

CaseDocument BuildDocument(const Session& s, const RunResult& result) {
  CaseDocument doc;
  doc.case_name = CaseName(s);
  doc.timestamp = UtcTimestamp();
  doc.workload = PlanToJson(s.plan());
  doc.warmup = s.config().warmup;
  doc.samples = s.config().samples;
  doc.trials = s.config().trials;
  doc.rows = result.rows;
  doc.implementation = Implementation(s, result);
  doc.ranks = {s.peer(), s.self()};  // target (rank 0) first
  doc.link = Link(s);
  doc.invalid_reasons = InvalidReasons(result);
  doc.completeness = CompletenessOf(PlannedRows(s.plan(), s.config().ops), result.rows,
                                    result.stopped_by, result.stopped_rank);
  return doc;
}

kvlane::Result<WrittenFile> WriteDocument(const CaseDocument& doc, const std::string& out_dir) {
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  std::string path = (std::filesystem::path(out_dir) / (doc.case_name + ".json")).string();
  return WriteFileAtomically(path, DumpCompact(DocumentToJson(doc)) + "\n");
}

kvlane::Status CheckOutputDir(const std::string& out_dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  // The directories this check creates, innermost first: removed again with
  // rmdir, which leaves any that another process filled meanwhile.
  std::vector<fs::path> made;
  for (fs::path p = fs::absolute(out_dir, ec); !p.empty() && !fs::exists(p, ec);
       p = p.parent_path()) {
    made.push_back(p);
    if (p.parent_path() == p) break;
  }
  fs::create_directories(out_dir, ec);
  if (ec) return kvlane::Status::InvalidArgument("--out " + out_dir + ": " + ec.message());
  std::string probe = (fs::path(out_dir) / ".kvbench-write-XXXXXX").string();
  int fd = mkstemp(probe.data());
  const int err = errno;
  if (fd >= 0) {
    close(fd);
    fs::remove(probe, ec);
  }
  for (const fs::path& p : made) {  // WriteDocument makes them again
    if (rmdir(p.c_str()) != 0) break;
  }
  if (fd < 0) {
    return kvlane::Status::InvalidArgument("--out " + out_dir +
                                           ": cannot write there: " + std::strerror(err));
  }
  return kvlane::Status::Ok();
}

std::string PartialLine(const CaseDocument& doc) {
  const Completeness& c = doc.completeness;
  const size_t planned = doc.rows.size() + c.missing.size();
  const std::string why = c.stopped_by.empty()
                              ? "ended early by a run-level error (see outcome)"
                              : "stopped by " + c.stopped_by + " on the " + c.stopped_rank;
  return fmt::format("PARTIAL RESULT, not a full run: {} after {} of {} rows", why, doc.rows.size(),
                     planned);
}

void PrintSummaryTable(const CaseDocument& doc, std::ostream& out) {
  fmt::print(out, "\nkvbench {}  transport {}  memory {}  {}\n", doc.case_name,
             doc.implementation.value("transport", "?"), DescribeMemory(doc.implementation),
             doc.implementation.value("library_version", "?"));
  const Completeness& c = doc.completeness;
  if (!c.complete) fmt::print(out, "{}\n", PartialLine(doc));
  fmt::print(out, "{:<5} {:>7} {:>5} {:>6} {:>9} {:>10} {:>10} {:>9} {:>9} {:>9}  {}\n", "op",
             "isl", "batch", "descs", "MB/req", "p50_ms", "p95_ms", "GB/s", "GB/s+prep", "ref_GB/s",
             "verified");
  for (const RowResult& r : doc.rows) {
    fmt::print(out,
               "{:<5} {:>7} {:>5} {:>6} {:>9.1f} {:>10.3f} {:>10.3f} {:>9.2f} {:>9.2f} "
               "{:>9.2f}  {}\n",
               r.op, r.isl, r.batch, r.descs, r.req_bytes / 1e6, r.burst_ms.p50, r.burst_ms.p95,
               r.gbps_p50, r.gbps_p50_incl_prep, r.reference.gbps_p50, VerdictName(r.verdict));
  }
  if (!c.complete)
    fmt::print(out, "not measured (neither failed nor verified): {}\n", DescribeRows(c.missing));
  fmt::print(out, "outcome: {}{}\n", doc.invalid_reasons.empty() ? "valid" : "INVALID",
             c.complete ? "" : " (over the rows measured)");
  for (const std::string& reason : doc.invalid_reasons) fmt::print(out, "  - {}\n", reason);
}

}  // namespace kvbench
