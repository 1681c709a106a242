#include "summarize.h"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "atomic_file.h"
#include "path_choice.h"
#include "plan_report.h"
#include "summary_charts.h"

namespace kvbench {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The files named, and the *.json files in the directories named and in the
// directories under them (a results tree of one run per directory), each file
// once however often it was named (two names of one directory, a file and its
// directory). An input that does not exist, or a directory that cannot be listed,
// is an error: a mistyped path is not the same as a directory without documents.
kvlane::Result<std::vector<std::string>> ExpandInputs(const std::vector<std::string>& inputs) {
  std::vector<std::string> files;
  std::set<fs::path> seen;  // canonical paths
  auto add = [&](const fs::path& p) {
    std::error_code ec;
    fs::path key = fs::weakly_canonical(p, ec);
    if (seen.insert(ec ? p : key).second) files.push_back(p.string());
  };
  for (const std::string& in : inputs) {
    std::error_code ec;
    if (!fs::exists(in, ec)) {
      return kvlane::Status::InvalidArgument(in + ": no such file or directory");
    }
    if (!fs::is_directory(in, ec)) {
      add(in);
      continue;
    }
    std::vector<fs::path> found;
    for (fs::recursive_directory_iterator it(in, ec), end; !ec && it != end; it.increment(ec)) {
      if (it->is_regular_file() && it->path().extension() == ".json") found.push_back(it->path());
    }
    if (ec) return kvlane::Status::InvalidArgument(in + ": cannot list: " + ec.message());
    std::sort(found.begin(), found.end());
    for (const fs::path& p : found) add(p);
  }
  return files;
}

std::string CaseSection(const LoadedDocument& d);

// The sections the summary reads must be there with their documented types: an
// edited or foreign document is skipped with the reason, instead of aborting the
// whole render on the first field of an unexpected type.
kvlane::Status CheckSections(const json& doc, const std::string& path) {
  if (!doc["rows"].is_array()) {
    return kvlane::Status::InvalidArgument(path + ": \"rows\" is not an array");
  }
  for (const char* key : {"identity", "workload", "implementation", "outcome"}) {
    if (!doc.contains(key) || !doc[key].is_object()) {
      return kvlane::Status::InvalidArgument(path + ": \"" + key +
                                             "\" is missing or not an object");
    }
  }
  return kvlane::Status::Ok();
}

kvlane::Result<LoadedDocument> LoadOne(const std::string& path) {
  std::ifstream in(path);
  if (!in) return kvlane::Status::NotFound("cannot open " + path);
  LoadedDocument d{path, json::parse(in, nullptr, false), {}, {}, {}};
  if (d.json.is_discarded()) {
    return kvlane::Status::InvalidArgument(path + " is not valid JSON (truncated?)");
  }
  if (!d.json.is_object() || !d.json.contains("rows") || !d.json["version"].is_number_integer()) {
    return kvlane::Status::InvalidArgument(path + " is not a kvbench case document");
  }
  // A version this build does not know (a newer kvbench's) may mean its fields otherwise.
  const int64_t version = d.json["version"].get<int64_t>();
  if (version < 1 || version > kDocumentVersion) {
    return kvlane::Status::InvalidArgument(fmt::format(
        "{} is a case document of version {}, which this kvbench does not read (it reads "
        "versions 1 to {}; a newer kvbench's?)",
        path, version, kDocumentVersion));
  }
  KVLANE_RETURN_IF_ERROR(CheckSections(d.json, path));
  for (const json& row : d.json["rows"]) {
    KVLANE_ASSIGN_OR_RETURN(RowResult r, RowFromJson(row));
    d.rows.push_back(std::move(r));
  }
  auto completeness = CompletenessFromJson(d.json);
  if (!completeness.ok()) {
    return kvlane::Status::InvalidArgument(path + ": " + completeness.status().message());
  }
  d.completeness = std::move(completeness).value();
  try {
    const json& impl = d.json["implementation"];
    d.series = fmt::format("{} {}{}", d.json["workload"].value("/workload/name"_json_pointer, "?"),
                           PathLabel(impl.value("transport", "?"), DocumentMemory(impl)),
                           d.completeness.complete ? "" : " (partial)");
    (void)CaseSection(d);  // every field it reads has the type it expects
  } catch (const json::exception& e) {
    return kvlane::Status::InvalidArgument(path + ": " + e.what());
  }
  return d;
}

std::string RowLine(const RowResult& r) {
  return fmt::format(
      "| {} | {} | {} | {} | {:.1f} | {:.3f} | {:.3f} | {:.3f} | {:.3f} | {:.2f} | "
      "{:.2f} | {:.3f} | {:.2f} | {} |\n",
      r.op, r.isl, r.batch, r.descs, r.req_bytes / 1e6, r.burst_ms.p50, r.burst_ms.p95,
      r.burst_ms.min, r.burst_ms.max, r.gbps_p50, r.gbps_p50_incl_prep, r.prep_ms,
      r.reference.gbps_p50, VerdictName(r.verdict));
}

// Why a partial document holds part of its grid: a stop, a checkpoint no later write
// replaced, or a run-level error.
std::string PartialWhy(const Completeness& c) {
  if (!c.stopped_by.empty()) {
    return fmt::format("stopped by {} on the {}", c.stopped_by,
                       c.stopped_rank.empty() ? "?" : c.stopped_rank);
  }
  if (c.running) {
    return "a checkpoint of a run that had not ended (killed outright, crashed, or still "
           "running), written";
  }
  return "the run ended early (see the outcome)";
}

// A partial document's line: why it stopped, how far it got, what it lacks.
std::string PartialLine(const LoadedDocument& d) {
  const Completeness& c = d.completeness;
  const std::string why = PartialWhy(c);
  return fmt::format(
      "- **PARTIAL**: {} after {} of {} rows; not measured (neither failed nor "
      "verified): {}\n",
      why, d.rows.size(), d.rows.size() + c.missing.size(),
      !c.missing.empty() ? DescribeRows(c.missing)
      : c.running        ? std::string("none (its last row had finished)")
                         : std::string("not listed"));
}

// The page header's word on partial documents; empty when every one is complete.
std::string PartialNote(const std::vector<LoadedDocument>& docs) {
  std::string partial;
  size_t n = 0;
  for (const LoadedDocument& d : docs) {
    if (d.completeness.complete) continue;
    partial += fmt::format("{}`{}`", n++ ? ", " : "", d.path);
  }
  if (n == 0) return "";
  return fmt::format(
      "**PARTIAL** ({} of {} document(s) hold part of their grid: the run ended before its "
      "last row, or had not ended when written): {}. Each one's section lists the rows it "
      "lacks as not measured (neither failed nor verified), and its chart lines are marked "
      "(partial).\n\n",
      n, docs.size(), partial);
}

std::string CaseSection(const LoadedDocument& d) {
  const json& impl = d.json["implementation"];
  const json& outcome = d.json["outcome"];
  const bool partial = !d.completeness.complete;
  std::string s = fmt::format("## {}{}\n\n", d.json["identity"].value("case", d.path),
                              partial ? " (PARTIAL)" : "");
  s += fmt::format("- document: `{}` ({})\n", d.path, d.json["identity"].value("timestamp", ""));
  s += fmt::format("- transport: {} (declared {}), memory {}, lanes {}, policy {}, {}\n",
                   impl.value("transport", "?"), impl.value("transport_declared", "?"),
                   DescribeMemory(impl), impl.value("lanes", 0), impl.value("policy", "?"),
                   impl.value("library_version", "?"));
  if (partial) s += PartialLine(d);
  const auto workload = d.json.find("workload");
  const std::string shed =
      workload != d.json.end() && workload->is_object() && workload->contains("points")
          ? ShedSummary((*workload)["points"])
          : std::string();
  if (!shed.empty()) s += "- " + shed + "\n";
  s += fmt::format("- outcome: {}{}\n", outcome.value("valid", false) ? "valid" : "INVALID",
                   partial ? " (over the rows measured)" : "");
  const json reasons = outcome.value("reasons", json::array());
  for (const json& r : reasons) {  // one line each, as written (a string), else its JSON
    s += fmt::format("  - {}\n", r.is_string() ? r.get<std::string>() : r.dump());
  }
  s += "\n";
  s += "| op | isl | batch | descs/req | MB/req | p50 ms | p95 ms | min ms | max ms | GB/s p50 "
       "| GB/s incl prep | prep ms | ref GB/s | verified |\n";
  s += "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n";
  for (const RowResult& r : d.rows) s += RowLine(r);
  return s + "\n";
}

}  // namespace

kvlane::Result<std::vector<LoadedDocument>> LoadDocuments(const std::vector<std::string>& inputs,
                                                          std::ostream& log,
                                                          std::vector<std::string>* skipped) {
  std::vector<LoadedDocument> docs;
  KVLANE_ASSIGN_OR_RETURN(std::vector<std::string> files, ExpandInputs(inputs));
  for (const std::string& path : files) {
    auto d = LoadOne(path);
    if (!d.ok()) {
      fmt::print(log, "kvbench summarize: skipping {}: {}\n", path, d.status().message());
      if (skipped != nullptr) skipped->push_back(path + ": " + d.status().message());
      continue;
    }
    docs.push_back(std::move(d).value());
  }
  if (docs.empty()) return kvlane::Status::NotFound("no kvbench case documents found");
  // Cases whose lines would read alike (e.g. one workload and path measured under
  // two policies) get their case names: a chart's legend must tell them apart.
  // Where the case names do not tell them apart either (one case in two runs'
  // directories), their paths do.
  std::map<std::string, int> uses, with_case;
  auto named = [](const LoadedDocument& d) {
    return d.series + " [" + d.json["identity"].value("case", d.path) + "]";
  };
  for (const LoadedDocument& d : docs) ++uses[d.series];
  for (const LoadedDocument& d : docs) ++with_case[named(d)];
  for (LoadedDocument& d : docs) {
    if (uses[d.series] < 2) continue;
    d.series = with_case[named(d)] < 2 ? named(d) : d.series + " (" + d.path + ")";
  }
  return docs;
}

std::string RenderMarkdown(const std::vector<LoadedDocument>& docs,
                           const std::vector<std::string>& chart_files,
                           const std::vector<std::string>& skipped) {
  std::string s = fmt::format(
      "# kvbench summary\n\nRendered from {} case document(s). Metrics are defined in "
      "docs/METHODOLOGY.md; GB/s are decimal (1e9 B/s) of request bytes.\n\n",
      docs.size());
  if (!skipped.empty()) {
    s += fmt::format("Skipped {} file(s), not rendered:\n\n", skipped.size());
    for (const std::string& why : skipped) s += "- " + why + "\n";
    s += "\n";
  }
  s += PartialNote(docs);
  for (const LoadedDocument& d : docs) s += CaseSection(d);
  if (!chart_files.empty()) s += "## Charts\n\n";
  for (const std::string& f : chart_files) s += fmt::format("![{}]({})\n\n", f, f);
  return s;
}

namespace {

// Renders every chart under out_dir; the first failure, and the charts drawn.
kvlane::Status RenderCharts(const std::vector<LoadedDocument>& docs, const std::string& out_dir,
                            std::vector<std::string>* files) {
  kvlane::Status first;
  for (const ChartSpec& c : {FrontierChart(docs), LatencyChart(docs)}) {
    kvlane::Status s = RenderChart(c, out_dir);
    if (s.ok()) files->push_back(c.name + ".svg");
    if (!s.ok() && first.ok()) first = s;
  }
  return first;
}

SummaryOutcome Fail(int exit_code, kvlane::Status why) { return {exit_code, std::move(why)}; }

}  // namespace

SummaryOutcome WriteSummary(const std::vector<std::string>& inputs, const std::string& out_dir,
                            std::ostream& log) {
  std::vector<std::string> skipped;
  auto docs = LoadDocuments(inputs, log, &skipped);
  if (!docs.ok()) {
    const bool none = docs.status().code() == kvlane::Code::kNotFound;
    return Fail(none ? kSummaryNoDocuments : kSummaryError, docs.status());
  }
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec)
    return Fail(kSummaryError,
                kvlane::Status::InvalidArgument("--out " + out_dir + ": " + ec.message()));
  std::vector<std::string> files;
  kvlane::Status charts = RenderCharts(docs.value(), out_dir, &files);
  // Whole or not at all: a reader never sees half a page, nor a failed render's.
  auto md = WriteFileAtomically((fs::path(out_dir) / "summary.md").string(),
                                RenderMarkdown(docs.value(), files, skipped));
  if (!md.ok()) return Fail(kSummaryError, md.status());
  fmt::print(log, "kvbench summarize: {} document(s) -> {}/summary.md, {} chart(s)\n", docs->size(),
             out_dir, files.size());
  if (!charts.ok()) return Fail(kSummaryChartFailed, charts);
  return {};
}

}  // namespace kvbench
