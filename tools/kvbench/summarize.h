// `kvbench summarize`: markdown tables and SVG charts rendered from case
// documents alone (no measurement state).
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "document.h"
#include "kvlane/status.h"

namespace kvbench {

struct LoadedDocument {
  std::string path;
  nlohmann::json json;
  std::vector<RowResult> rows;
  // Whether `rows` holds the whole grid; a document without the field (version 3
  // and older) is complete.
  Completeness completeness;
  // "<workload> <PathLabel>", then " (partial)" for a partial document: how charts
  // name this case's lines.
  std::string series;
};

// Reads every *.json case document in the given files or directories (sorted by
// path). Files without an integer "version" and "rows" are skipped with a note.
// kInvalidArgument when an input does not exist or cannot be listed; kNotFound
// when no document was found. `skipped` (if given) gets "path: why" of each file
// skipped.
kvlane::Result<std::vector<LoadedDocument>> LoadDocuments(
    const std::vector<std::string>& inputs, std::ostream& log,
    std::vector<std::string>* skipped = nullptr);

// The summary page: one table per case, then the charts (by file name). A partial
// document (a stopped run) is called PARTIAL in the page's header and its case's
// heading, and its section lists the rows it lacks as not measured: they are
// neither failures nor missing results of a complete run.
// `skipped`: the files read and not rendered (LoadDocuments), listed under the header.
std::string RenderMarkdown(const std::vector<LoadedDocument>& docs,
                           const std::vector<std::string>& chart_files,
                           const std::vector<std::string>& skipped = {});

// The exit codes of `kvbench summarize` (README), apart for a calling script.
inline constexpr int kSummaryWritten = 0;      // summary.md and every chart
inline constexpr int kSummaryError = 2;        // an input missing, --out not writable
inline constexpr int kSummaryChartFailed = 3;  // summary.md written, a chart not
inline constexpr int kSummaryNoDocuments = 4;  // no case document in the inputs: nothing written

struct SummaryOutcome {
  int exit_code = kSummaryWritten;
  kvlane::Status status;  // why, for any other exit code
};

// Loads, writes summary.md and the charts under out_dir. summary.md is written
// even when a chart could not be rendered (kSummaryChartFailed).
SummaryOutcome WriteSummary(const std::vector<std::string>& inputs, const std::string& out_dir,
                            std::ostream& log);

}  // namespace kvbench
