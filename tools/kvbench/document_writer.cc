#include "document_writer.h"

#include <fmt/format.h>

#include "common/environment.h"
#include "run_report.h"

namespace kvbench {

bool CheckpointPace::Due(size_t rows, size_t planned, Clock::time_point now) const {
  return !last_.has_value() || rows >= planned || now - *last_ >= every_;
}

DocumentWriter::DocumentWriter(const Session* session, nlohmann::json environment,
                               std::chrono::milliseconds every)
    : s_(session),
      environment_(std::move(environment)),
      command_(kvlane_tools::CommandLine()),
      pace_(every) {}

DocumentWriter::~DocumentWriter() {
  try {
    EndWithError(
        "the run ended with an error before its final document was written (the "
        "initiator's stderr says which)");
  } catch (...) {  // never from a destructor; the checkpoint stays as it is
  }
}

CaseDocument DocumentWriter::Build(const RunResult& result) const {
  CaseDocument doc = BuildDocument(*s_, result);
  doc.environment = environment_;
  doc.command = command_;
  return doc;
}

void DocumentWriter::Checkpoint(const RunResult& so_far) {
  const size_t planned = PlannedRows(s_->plan(), s_->config().ops).size();
  if (!pace_.Due(so_far.rows.size(), planned, CheckpointPace::Clock::now())) return;
  CaseDocument doc = Build(so_far);
  doc.completeness.complete = false;  // not until the final write, even after the last row
  doc.completeness.running = true;
  auto written = Write(doc);
  pace_.Ended(CheckpointPace::Clock::now());
  if (written.ok()) {
    checkpointed_ = so_far;
    checkpoint_path_ = written->path;
    return;
  }
  if (warned_) return;
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
  ended_ |= !doc.completeness.running;
  return written;
}

void DocumentWriter::EndWithError(const std::string& why) {
  if (ended_ || !checkpointed_.has_value()) return;
  RunResult result = *checkpointed_;
  result.errors.push_back(why);
  auto written = Write(Final(result));
  const size_t rows = result.rows.size();
  if (written.ok()) {
    fmt::print(stderr,
               "[kvbench] wrote {} (partial: the run ended with an error after {} row(s))\n",
               written->path, rows);
    return;
  }
  ended_ = true;  // said once
  fmt::print(stderr,
             "kvbench: {} holds the checkpoint after row {}, which reads as a run that had not "
             "ended; the run ended with an error ({}), and writing that failed too ({})\n",
             checkpoint_path_, rows, why, written.status().message());
}

}  // namespace kvbench
