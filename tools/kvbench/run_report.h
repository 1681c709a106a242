// What `kvbench run` tells the world: a progress line per row, the case
// document (JSON), and a summary table at the end.
#pragma once

#include <ostream>
#include <string>

#include "atomic_file.h"
#include "document.h"
#include "row_runner.h"
#include "session.h"

namespace kvbench {

std::string ProgressLine(const RowResult& row);
// Why the run is invalid (failed or unverified rows, run-level errors); empty: valid.
// Rows a stop left unmeasured are not among them (the document's completeness).
std::vector<std::string> InvalidReasons(const RunResult& result);
CaseDocument BuildDocument(const Session& session, const RunResult& result);
// Writes <out_dir>/<case>.json atomically (atomic_file.h): a document of that name
// from an earlier run is replaced whole, and the result says so.
kvlane::Result<WrittenFile> WriteDocument(const CaseDocument& doc, const std::string& out_dir);
// Checks that a file can be written in out_dir (creating it for the check and
// removing what it created), so that a run stops before measuring rather than
// losing its document at the end.
kvlane::Status CheckOutputDir(const std::string& out_dir);
// The table of every row; a partial document's is headed by PartialLine and followed
// by the rows it lacks.
void PrintSummaryTable(const CaseDocument& doc, std::ostream& out);
// "PARTIAL RESULT, not a full run: stopped by SIGINT on the initiator after 3 of 8 rows".
// REQUIRES: !doc.completeness.complete.
std::string PartialLine(const CaseDocument& doc);
// "<workload>-b<block>-<transport>" unless the config names the case; the
// transport is followed by "-<memory>" when the pool is not in its own memory,
// and by both ranks' memory, target first, when they differ (PathLabel:
// "kv-dsv4-b256-tcp-cuda", "kv-dsv4-b256-tcp-cuda-host"); a --dtype, staging
// copy, --policy, --lanes, --grid, --isl, --batches or --ops other than the
// default is named too (DefaultCaseName).
std::string CaseName(const Session& session);

}  // namespace kvbench
