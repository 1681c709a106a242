#include "document_writer.h"

#include <fmt/format.h>

#include "common/environment.h"
#include "run_report.h"

namespace kvbench {

DocumentWriter::DocumentWriter(const Session* session, nlohmann::json environment)
    : s_(session), environment_(std::move(environment)), command_(kvlane_tools::CommandLine()) {}

CaseDocument DocumentWriter::Build(const RunResult& result) const {
  CaseDocument doc = BuildDocument(*s_, result);
  doc.environment = environment_;
  doc.command = command_;
  return doc;
}

void DocumentWriter::Checkpoint(const RunResult& so_far) {
  CaseDocument doc = Build(so_far);
  if (doc.completeness.complete) return;  // the last row: the final document comes next
  doc.completeness.running = true;
  auto written = Write(doc);
  if (written.ok() || warned_) return;
  warned_ = true;
  fmt::print(stderr,
             "[kvbench] could not write the document after row {} ({}); the run goes on, and "
             "writes it at its end\n",
             so_far.rows.size(), written.status().message());
}

CaseDocument DocumentWriter::Final(const RunResult& result) const {
  CaseDocument doc = Build(result);
  doc.environment["loadavg_end"] = kvlane_tools::LoadAverage();
  return doc;
}

kvlane::Result<WrittenFile> DocumentWriter::Write(const CaseDocument& doc) {
  auto written = WriteDocument(doc, s_->config().out_dir);
  if (!written.ok()) return written;
  if (!replaced_earlier_.has_value()) replaced_earlier_ = written->replaced;
  written->replaced = *replaced_earlier_;
  return written;
}

}  // namespace kvbench
