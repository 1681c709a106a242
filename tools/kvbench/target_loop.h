// TargetLoop: the target's side of a run. The target owns the pool and posts
// nothing: it serves the initiator's control messages (prepare and check the
// verified burst of each row, serve the socket reference) until "done".
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "burst_map.h"
#include "session.h"
#include "stop_check.h"

namespace kvbench {

// How often the target says "busy" during the row message `row`: a quarter of the
// smaller of its control_timeout_ms (untrusted: absent, not an integer or <= 0, it
// is ignored) and this rank's control timeout `own`.
std::chrono::milliseconds BusyEvery(const nlohmann::json& row, std::chrono::milliseconds own);

// What a "row" or "ref" message asks of the target, read field by field (the
// initiator's message is untrusted input).
struct Asked {
  bool push = false;  // push lands on the target; pull reads from it
  uint64_t batch = 0;
  uint64_t epoch = 0;  // rows; absent reads 0
  int reps = 0;        // references; absent reads 1
};
// The op must be "push" or "pull", the batch one the plan measures at `point`
// (another would size the burst map past the pool), reps (when given) an integer
// within [0, 2^30]; else
// kInvalidArgument, naming no peer text.
kvlane::Result<Asked> ReadAsked(const nlohmann::json& message, const PlanPoint& point);

class TargetLoop {
 public:
  // REQUIRES: session is the target's and outlives the loop.
  explicit TargetLoop(Session* session) : s_(session) {}
  // Returns when the initiator says "done" (ok) or the control plane fails.
  //
  // A row may end early either way. The initiator may abandon it ("abandon"): the
  // target takes it in place of the row message it waits for, or notices it
  // waiting between pieces of its own wipe, fill or check, leaves the row and
  // answers "abandoned". A stop signal reaching this rank (common/stop_signal.h)
  // ends its wipe, fill or check at the next piece, and it tells the initiator
  // once ("stopped" and the signal's name) as soon as it next waits for the
  // initiator (within kStopPoll), in place of the answer the initiator waits for
  // or unasked; from then on it serves no row message, only "abandon" and "done".
  // Serving a socket reference, it finishes the repetition in flight (its raw bytes
  // leave no room for a message) and tells it in place of that repetition's
  // "ref_done" (after the last one, as it next waits).
  // While it wipes, fills or checks its side of a row, the initiator waits for its
  // answer under a control timeout: it says "busy" once a quarter of the smaller of
  // both ranks' control timeouts has passed since the row message came or its last "busy"
  // (as the initiator does while it works alone), so that a long row does not look
  // like a silent peer.
  kvlane::Status Run();
  // After Run ended ok: false when the initiator's "done" said the run is
  // invalid (a row failed or went unverified, or a run-level error), or this
  // rank found a mismatch in bytes pushed to it. The initiator's document says why.
  bool RunValid() const { return initiator_valid_ && !saw_mismatch_; }
  // After Run ended ok: false when the initiator's "done" said that not every
  // planned row ran: a stop signal (stopped_by() names it, stopped_rank() the rank
  // it reached) or a run-level error (both empty) ended the run early.
  bool RunComplete() const { return complete_; }
  const std::string& stopped_by() const { return stopped_by_; }
  const std::string& stopped_rank() const { return stopped_rank_; }

 private:
  kvlane::Result<const PlanPoint*> PointFor(const nlohmann::json& message);
  kvlane::Status HandleRow(const nlohmann::json& message);
  // Wipes (push) or fills (pull) this rank's side of a row's verified burst.
  kvlane::Status Prepare(bool push, const BurstMap& map, uint64_t epoch, const StopCheck& stop);
  // Testing (--inject-fault silent-target-prepare): says nothing for `how_long`,
  // or until Interrupted().
  void SilentFor(std::chrono::milliseconds how_long);
  // Interrupted(), saying "busy" first when due (see Run).
  bool InterruptedWhileInitiatorWaits();
  kvlane::Status HandleReference(const nlohmann::json& message);
  // The initiator's next message: the one a row step held back, else the next on
  // the connection; a stop of this rank not yet told is told first, or while it
  // waits. "busy" (the initiator working alone on a long row) is passed over, each
  // one starting the control timeout's wait anew.
  kvlane::Result<nlohmann::json> Next();
  // Next(), when it is of `type` and this rank has not told a stop; else the
  // message is held back for the loop and kCanceled returned (the row ends here).
  kvlane::Result<nlohmann::json> NextOf(const std::string& type);
  kvlane::Status TellStopped();
  bool StopUntold() const;
  // Whether a row step should give up: a stop of this rank, or a message waiting
  // (while the target prepares or checks, the initiator sends only "abandon").
  bool Interrupted() const;
  // A row handler's status that means "the row ended early" (not a failure).
  bool EndedEarly(const kvlane::Status& s) const;

  Session* s_;
  PoolList list_;
  std::vector<uint64_t> list_shape_;
  std::optional<nlohmann::json> held_;  // a message a row step took for the loop
  bool told_stop_ = false;              // "stopped" has been sent
  bool initiator_valid_ = true;         // "done"'s "valid" (absent: true)
  bool complete_ = true;                // "done"'s "complete" (absent: true)
  std::string stopped_by_;              // "done"'s "stopped_by"
  std::string stopped_rank_;            // "done"'s "stopped_rank"
  bool saw_mismatch_ = false;           // a push this rank checked failed
  // The initiator waits since then (its last message, or this rank's last "busy"), for
  // at most busy_every_ x 4 (the row message's control_timeout_ms, else this rank's).
  std::chrono::steady_clock::time_point initiator_waits_since_{};
  std::chrono::milliseconds busy_every_{0};
};

}  // namespace kvbench
