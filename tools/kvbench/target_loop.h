// TargetLoop: the target's side of a run. The target owns the pool and posts
// nothing: it serves the initiator's control messages (prepare and check the
// verified burst of each row, serve the socket reference) until "done".
#pragma once

#include <vector>

#include "burst_map.h"
#include "session.h"

namespace kvbench {

class TargetLoop {
 public:
  // REQUIRES: session is the target's and outlives the loop.
  explicit TargetLoop(Session* session) : s_(session) {}
  // Returns when the initiator says "done" (ok) or the control plane fails. Once a
  // stop signal reached this rank (common/stop_signal.h) it starts no new row: it
  // answers the initiator's next "row" with "stopped" and the signal's name, and
  // goes on waiting for "done".
  kvlane::Status Run();

 private:
  kvlane::Result<const PlanPoint*> PointFor(const nlohmann::json& message);
  kvlane::Status HandleRow(const nlohmann::json& message);
  kvlane::Status HandleReference(const nlohmann::json& message);

  Session* s_;
  PoolList list_;
  std::vector<uint64_t> list_shape_;
};

}  // namespace kvbench
