// DocumentWriter: the initiator's case document on disk through a run. After a row
// finishes it writes the rows so far (a checkpoint: "complete": false, "running":
// true, even after the last row: the run has not ended until its final write), so
// that a run killed outright (SIGKILL) or a host that crashed keeps what it measured;
// the run's final document replaces it. A run that ends with an error after a
// checkpoint and before its final document (a final write that fails, an exception)
// ends the document as such (EndWithError). Every write is whole or not at all
// (atomic_file.h). Called between rows only, never within a timed burst. One thread;
// the session outlives it.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "atomic_file.h"
#include "document.h"
#include "row_runner.h"
#include "session.h"

namespace kvbench {

// The least wall time between two checkpoints, but after the first row and the last.
inline constexpr std::chrono::milliseconds kCheckpointEvery{2000};

// When a checkpoint is due: after the first row, after the last planned row, and
// otherwise once `every` has passed since the previous checkpoint ended (its write
// included). Each checkpoint rewrites the whole document, whose size grows with the
// rows and their samples: so the run spends at most W / (every + W) of its time
// writing checkpoints, W being one write's time, and a run killed outright loses at
// most the rows of the last `every`. Plain value.
class CheckpointPace {
 public:
  using Clock = std::chrono::steady_clock;
  explicit CheckpointPace(std::chrono::milliseconds every = kCheckpointEvery) : every_(every) {}
  // After `rows` of `planned` rows finished, at `now`.
  bool Due(size_t rows, size_t planned, Clock::time_point now) const;
  // A checkpoint (written or not) ended at `at`.
  void Ended(Clock::time_point at) { last_ = at; }

 private:
  std::chrono::milliseconds every_;
  std::optional<Clock::time_point> last_;
};

class DocumentWriter {
 public:
  // `environment`: the host's (common/environment.h), taken as the run started.
  // REQUIRES: session is the initiator's and outlives the writer.
  // `every`: the checkpoints' pace (CheckpointPace).
  DocumentWriter(const Session* session, nlohmann::json environment,
                 std::chrono::milliseconds every = kCheckpointEvery);
  // EndWithError, its reason unknown here (an exception the caller did not name), when
  // a checkpoint was written and no document that ended the run.
  ~DocumentWriter();
  DocumentWriter(const DocumentWriter&) = delete;
  DocumentWriter& operator=(const DocumentWriter&) = delete;

  // Writes the rows of `so_far` as a checkpoint when one is due (CheckpointPace). A
  // failed write is said on stderr (the first one only) and otherwise ignored: the
  // run goes on, and the final write tries again.
  void Checkpoint(const RunResult& so_far);

  // The document of the run `result`, its environment closed with "loadavg_end".
  CaseDocument Final(const RunResult& result) const;

  // Writes `doc` (<out>/<case>.json), replacing this run's checkpoint. The result's
  // `replaced` says whether this run replaced a document of an earlier run (its first
  // write that succeeded did), not its own checkpoint.
  kvlane::Result<WrittenFile> Write(const CaseDocument& doc);

  // The run ended with error `why` after a checkpoint, before a document that ended it
  // was written: writes the last checkpoint's rows as a run that ended ("running"
  // gone), `why` among the outcome's reasons, and says so on stderr; where that write
  // fails too, says on stderr which file holds the checkpoint, after which row. Does
  // nothing when no checkpoint was written or a document that ended the run was.
  void EndWithError(const std::string& why);

 private:
  CaseDocument Build(const RunResult& result) const;

  const Session* s_;
  nlohmann::json environment_;
  std::string command_;
  std::optional<bool> replaced_earlier_;  // the first successful write's `replaced`
  bool warned_ = false;                   // a failed checkpoint was said
  CheckpointPace pace_;
  std::optional<RunResult> checkpointed_;  // the rows of the last checkpoint written
  std::string checkpoint_path_;            // where it lies
  bool ended_ = false;                     // a document that ended the run was written
};

}  // namespace kvbench
