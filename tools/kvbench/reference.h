// The reference row: the same bytes, in the same descriptor pairs and the same
// direction as the row's op (pull: target -> initiator; push: initiator ->
// target), moved by the plainest path: memcpy inside one process (shm, local),
// cudaMemcpy on the GPU (cuda), or a plain socket send/recv loop between the
// ranks (tcp; staged through pinned host memory for device pools). Gives each
// row a floor to compare to.
#pragma once

#include <cstdint>

#include "burst_map.h"
#include "control_channel.h"
#include "document.h"
#include "kvlane/transfer.h"
#include "pool_ops.h"

namespace kvbench {

// Copies every pair of one pool from its source-side extent to its landing-side
// extent (kRead: target-side to initiator-side; kWrite: the reverse), `reps` times
// after one warm-up. REQUIRES: reps >= 1.
ReferenceFigures MemcpyReference(uint8_t* pool, const PoolList& list, const BurstMap& map,
                                 kvlane::Op op, int reps);

// The same pairs copied with cudaMemcpy device to device (pool is a device pointer).
ReferenceFigures DeviceCopyReference(uint8_t* pool, const PoolList& list, const BurstMap& map,
                                     kvlane::Op op, int reps);

// The socket reference, run by both ranks with the same map, op and reps. Per rep
// the initiator says go; for kRead the target sends its extents and the initiator
// receives them into its own, for kWrite the initiator sends and the target
// receives, then acknowledges. Timed on the initiator, from go to the last byte
// received (kRead) or to the acknowledgement (kWrite). A device pool's extents go
// through a pinned host buffer on each side, 4 MiB at a time, a cudaMemcpy and the
// socket call one after the other (method "socket-staged"); the buffer is
// allocated before the timed reps. REQUIRES: both ranks' pools are of one kind.
kvlane::Result<ReferenceFigures> SocketReferenceInitiator(ControlChannel* control,
                                                          const PoolView& pool,
                                                          const PoolList& list, const BurstMap& map,
                                                          kvlane::Op op, int reps);
kvlane::Status SocketReferenceTarget(ControlChannel* control, const PoolView& pool,
                                     const PoolList& list, const BurstMap& map, kvlane::Op op,
                                     int reps);

}  // namespace kvbench
