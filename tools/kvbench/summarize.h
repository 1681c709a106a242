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
  std::string series;  // "<workload> <PathLabel>": how charts name this case's lines
};

// Reads every *.json case document in the given files or directories (sorted by
// path). Files without an integer "version" and "rows" are skipped with a note.
kvlane::Result<std::vector<LoadedDocument>> LoadDocuments(const std::vector<std::string>& inputs,
                                                          std::ostream& log);

// The summary page: one table per case, then the charts (by file name).
std::string RenderMarkdown(const std::vector<LoadedDocument>& docs,
                           const std::vector<std::string>& chart_files);

// Loads, writes summary.md and the charts under out_dir. Returns an error when no
// document was found or a chart could not be rendered (summary.md is still written).
kvlane::Status WriteSummary(const std::vector<std::string>& inputs, const std::string& out_dir,
                            std::ostream& log);

}  // namespace kvbench
