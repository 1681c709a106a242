// The reference row: the same bytes, in the same descriptor pairs and the same
// direction as the row's op (pull: target -> initiator; push: initiator ->
// target), moved by the plainest path: memcpy inside one process (shm, local),
// cudaMemcpy on the GPU (cuda), or a plain socket send/recv loop between the
// ranks (tcp; staged through pinned host memory on each rank whose pool is on a
// GPU). Gives each
// row a floor to compare to.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "burst_map.h"
#include "control_channel.h"
#include "document.h"
#include "kvlane/transfer.h"
#include "pool_ops.h"
#include "stop_check.h"

namespace kvbench {

// Copies every pair of one pool from its source-side extent to its landing-side
// extent (kRead: target-side to initiator-side; kWrite: the reverse), `reps` times
// after one warm-up. `stop` (stop_check.h) is asked before each rep and between
// pairs (StopPacer); nullopt, the reference unfinished, once it answers true.
// REQUIRES: reps >= 1.
std::optional<ReferenceFigures> MemcpyReference(uint8_t* pool, const PoolList& list,
                                                const BurstMap& map, kvlane::Op op, int reps,
                                                const StopCheck& stop = {});

// The same pairs copied with cudaMemcpy device to device (pool is a device pointer).
std::optional<ReferenceFigures> DeviceCopyReference(uint8_t* pool, const PoolList& list,
                                                    const BurstMap& map, kvlane::Op op, int reps,
                                                    const StopCheck& stop = {});

// Testing only (--inject-fault): a socket reference that fails on purpose on the
// rank given it. kSetup: as if its pinned staging buffer could not be allocated,
// before any raw byte; kStream: as if a device copy failed after the first extent
// of the warm-up rep, partway through the raw bytes.
enum class ReferenceFault { kNone, kSetup, kStream };

// The fault --inject-fault asks of `role`'s ("target" | "initiator") reference:
// "ref-<role>-setup" or "ref-<role>-stream"; kNone for any other value.
ReferenceFault ReferenceFaultFor(const std::string& flag, const std::string& role);

// The socket reference, run by both ranks with the same map, op and reps once the
// initiator has sent the row's "ref" request. The target allocates its staging
// buffer and answers "ref_ready"; the initiator's caller waits for it (an "error"
// instead gives the target's reason) and passes it on, and the initiator then
// allocates its own. Per rep the initiator says go; for kRead the target sends its extents and
// the initiator receives them into its own, for kWrite the initiator sends and the
// target receives; either way the target then answers the rep ("ref_done"). Timed on
// the initiator, from go to the last byte received (kRead; the answer comes after)
// or to the answer (kWrite). Each rank stages where
// the engine does: a device pool's extents go through a pinned host buffer on that
// rank, 4 MiB at a time, a cudaMemcpy and the socket call one after the other; a
// host pool's are sent from and received into the pool directly. "ref_ready" says
// whether the target stages; the method names where staging happened
// (SocketReferenceMethod: "socket", "socket-staged" on both ranks,
// "socket-staged-target" or "socket-staged-initiator" for a mixed pair). The
// buffers are allocated before the timed reps.
//
// On failure the connection is in one of two states, and the run cannot go on
// over it in either. Before "ref_ready" (the target) or before the first rep (the
// initiator) it is still framed: the caller tells its peer why with an "error"
// message, as for any other failure; the initiator's wait for "ref_ready" returns
// the target's reason ("peer reported: ..."). Once the reps have begun the raw
// bytes may be cut partway, so the failing rank aborts the connection
// (ControlChannel::Abort: every later send is refused) and its peer's wait fails
// at once instead of at the control timeout. The ranks' pools may be of different
// kinds (a mixed --memory pair).
//
// Either rank may end the reps early at a rep boundary, the connection intact and
// framed; a rep once begun runs whole (its raw bytes cannot be cut short without
// ending the connection). The initiator asks its `stop` before each rep; once it
// answers true the initiator returns kCanceled and sends nothing more: its caller
// tells the target ("abandon", which the target takes in place of the next
// "ref_go" and returns kCanceled for). The target asks its `stop` at the end of
// each rep but the last; once it answers true the target returns kCanceled with
// that rep unanswered, and its caller answers it with "stopped" (and the signal),
// which the initiator takes in place of "ref_done": kCanceled, the signal in
// *target_stop (when not null), and its caller tells the target "abandon" as
// above. A stop of the target after the last rep is left to its caller.
kvlane::Result<ReferenceFigures> SocketReferenceInitiator(
    ControlChannel* control, const nlohmann::json& ready, const PoolView& pool,
    const PoolList& list, const BurstMap& map, kvlane::Op op, int reps,
    ReferenceFault fault = ReferenceFault::kNone, const StopCheck& stop = {},
    std::string* target_stop = nullptr);
kvlane::Status SocketReferenceTarget(ControlChannel* control, const PoolView& pool,
                                     const PoolList& list, const BurstMap& map, kvlane::Op op,
                                     int reps, ReferenceFault fault = ReferenceFault::kNone,
                                     const StopCheck& stop = {});

}  // namespace kvbench
