// DocumentWriter: the initiator's case document on disk through a run. After every
// row that finished while more rows are to come it writes the rows so far (a
// checkpoint: "complete": false, "running": true), so that a run killed outright
// (SIGKILL) or a host that crashed keeps what it measured; the run's final document
// replaces it. Every write is whole or not at all (atomic_file.h). Called between
// rows only, never within a timed burst. One thread; the session outlives it.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "atomic_file.h"
#include "document.h"
#include "row_runner.h"
#include "session.h"

namespace kvbench {

class DocumentWriter {
 public:
  // `environment`: the host's (common/environment.h), taken as the run started.
  // REQUIRES: session is the initiator's and outlives the writer.
  DocumentWriter(const Session* session, nlohmann::json environment);

  // Writes the rows of `so_far` as a checkpoint, unless they are every planned row
  // (the final document comes next). A failed write is said on stderr (the first
  // one only) and otherwise ignored: the run goes on, and the final write tries again.
  void Checkpoint(const RunResult& so_far);

  // The document of the run `result`, its environment closed with "loadavg_end".
  CaseDocument Final(const RunResult& result) const;

  // Writes `doc` (<out>/<case>.json), replacing this run's checkpoint. The result's
  // `replaced` says whether this run replaced a document of an earlier run (its first
  // write that succeeded did), not its own checkpoint.
  kvlane::Result<WrittenFile> Write(const CaseDocument& doc);

 private:
  CaseDocument Build(const RunResult& result) const;

  const Session* s_;
  nlohmann::json environment_;
  std::string command_;
  std::optional<bool> replaced_earlier_;  // the first successful write's `replaced`
  bool warned_ = false;                   // a failed checkpoint was said
};

}  // namespace kvbench
