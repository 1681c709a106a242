// RowRunner: the initiator's side of a run. For every (ISL, batch, op) of the
// plan it prepares the burst, runs one verified burst agreed with the target,
// then the warm-up and timed bursts, then the reference. One thread.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "burst.h"
#include "burst_map.h"
#include "document.h"
#include "session.h"

namespace kvbench {

struct RunResult {
  std::vector<RowResult> rows;      // the rows that finished, each measured whole
  std::vector<std::string> errors;  // run-level failures (the run is invalid)
  double list_prep_ms = 0;          // PrepareLocal + PrepareRemote of the pool lists
  // A stop signal ended the run before its last row: its name ("SIGINT") and the
  // rank it stopped ("initiator", or "target" when the target said so). Empty if none.
  std::string stopped_by, stopped_rank;
};

class RowRunner {
 public:
  // Called after each row that finished (so_far.rows.back()), between rows: never
  // within a timed burst. The target was told "busy" just before, so a call may take
  // up to the control timeout (a checkpoint's write).
  using Progress = std::function<void(const RunResult& so_far)>;
  // REQUIRES: session is the initiator's and outlives the runner.
  explicit RowRunner(Session* session) : s_(session) {}
  ~RowRunner();

  // Runs every row, then tells the target the run is done. A failed socket
  // reference stops the run there (a run-level error in the result) and ends the
  // control connection instead. A stop signal caught by this rank
  // (common/stop_signal.h), or one the target tells of ("stopped"), ends the run
  // promptly: the row in flight is abandoned at its next safe point (between
  // pieces of a pool wipe, fill or check, between bursts, while a burst waits,
  // between reference reps, or while waiting for the target), its transfers
  // canceled or waited for, and the target told ("abandon", answered with
  // "abandoned" once it has left the row); the target is then told "done" as
  // usual, and the result names the stop. A row is kept only measured whole.
  RunResult RunAll(const Progress& progress);

 private:
  void RunPoints(const Progress& progress, RunResult* result);
  // A stop signal reached this rank, or the target told of one: read here when a
  // message waits while the target owes none (it tells unasked only then).
  bool Stopping();
  // Stopping(), saying "busy" first when due (KeepTargetWaiting): the StopCheck of
  // the steps this rank takes alone while the target waits for its next message.
  bool StoppingWhileTargetWaits();
  // The target waits for this rank's next message under its own control timeout.
  // While this rank works alone (its verified burst, the timed bursts, a reference
  // within this process) it sends "busy" once a quarter of that timeout has passed
  // since the target last answered or was told "busy", so that a long row does not
  // look like a silent peer. Never during a socket reference (its messages are in
  // lockstep) nor while the target works on a row step (it would take the message
  // for an "abandon" waiting).
  void KeepTargetWaiting();
  // Sends "busy" now: the target waits a whole control timeout from here.
  void TellTargetBusy();
  // After the target said it was stopped: waits up to kOwnStopGrace for this
  // rank's own stop signal, which the same stop may still be delivering.
  void AwaitOwnStop() const;
  static constexpr std::chrono::milliseconds kOwnStopGrace{250};
  // burst->Run under the control timeout, asking Stopping() and keeping the target
  // waiting (KeepTargetWaiting) until it ends, through its grace too.
  BurstTiming RunBurst(Burst* burst);
  kvlane::Status PrepareLists(const PlanPoint& point, RunResult* result);
  void ReleaseLists();
  // The row, measured whole (or failed); nullopt when a stop came first (the
  // caller then abandons it with the target).
  std::optional<RowResult> RunRow(const std::string& op, const PlanPoint& point,
                                  const BurstMap& map, uint64_t epoch);
  // These return false when a stop dropped the row. VerifiedBurst: the burst
  // between a fresh pattern of `epoch` (sources filled, destinations wiped) and
  // the check of every landed byte; its timing goes to `timing` (if given).
  bool VerifiedBurst(Burst* burst, const std::string& op, const PlanPoint& point,
                     const BurstMap& map, uint64_t epoch, RowResult* row,
                     BurstTiming* timing = nullptr);
  std::optional<LocalCheck> LandAndCheck(Burst* burst, bool push, const BurstMap& map,
                                         uint64_t epoch, std::string* detail, BurstTiming* timing);
  bool AgreeOnVerdict(LocalCheck mine, const std::string& detail, RowResult* row);
  // The warm-up and timed bursts; the last timed one is verified too
  // (LastBurstEpoch): its sample is kept only if every byte landed.
  bool TimedBursts(Burst* burst, const std::string& op, const PlanPoint& point, const BurstMap& map,
                   uint64_t epoch, RowResult* row);
  // The last timed burst, verified; adds its check to the row's verdict and detail.
  bool VerifiedLastBurst(Burst* burst, const std::string& op, const PlanPoint& point,
                         const BurstMap& map, uint64_t epoch, RowResult* row, BurstTiming* t);
  bool Reference(const std::string& op, const PlanPoint& point, const BurstMap& map, uint64_t epoch,
                 RowResult* row);
  // Reads an answer of `types` to a row message, or the target's "stopped"; gives
  // up on a stop of this rank while waiting. The answer; nullopt when a stop came
  // (the target's is recorded); an empty object on a control failure (`row` failed,
  // saying why, and the run stopped: StopRun, since the target's late answer to this
  // row would be taken for the next row's).
  std::optional<nlohmann::json> Answer(const std::vector<std::string>& types, RowResult* row);
  // Tells the target the row in flight is dropped and waits until it has left it.
  void Abandon();
  // Receives until a message of `type`, passing over the row's answers already on
  // their way and a "stopped" (recorded).
  kvlane::Status ReceiveUntil(const std::string& type);
  void StopRun(const std::string& reason);
  // A burst `t` left transfers running past its timeout and grace (burst.h): the pool
  // is still in use, so the run stops (StopRun) and the row fails.
  void LeftRunning(const BurstTiming& t);

  // Where the row in flight is, for its progress lines (TellProgress).
  struct RowProgress {
    std::string row;         // "pull isl 8192 batch 4"; empty between rows
    const char* phase = "";  // "the verified burst", "the reference", ...
    // The burst running (from 1), of how many, the first `warmup` of them warm-up bursts.
    int64_t burst = 0, bursts = 0, warmup = 0;
    std::chrono::steady_clock::time_point started{}, next_line{}, bursts_started{};
  };
  // Prints where the row in flight is once --progress-every has passed since the
  // row began or the last such line; called at the row's safe points (Stopping).
  void TellProgress();

  Session* s_;
  PoolList list_;
  std::vector<uint64_t> list_shape_;  // desc_bytes per group the lists were made for
  kvlane::PreparedId local_, remote_;
  std::string stop_;          // why the run stopped early (a run-level error); empty while it runs
  std::string peer_stop_;     // the signal the target said it was stopped by; empty if none
  bool pool_in_use_ = false;  // a burst left transfers running (LeftRunning)
  std::chrono::steady_clock::time_point target_waits_since_{};  // see KeepTargetWaiting
  RowProgress progress_;
};

kvlane::Op OpOf(const std::string& op);  // pull = READ, push = WRITE

}  // namespace kvbench
