// The reference row: the same bytes, in the same descriptor pairs, moved by the
// plainest path: memcpy inside one process (shm, local), cudaMemcpy on the GPU
// (cuda), or a plain socket send/recv loop between the ranks (tcp). Gives each row a floor to
// compare to.
#pragma once

#include <cstdint>

#include "burst_map.h"
#include "control_channel.h"
#include "document.h"

namespace kvbench {

// Copies every pair from the target-side extents to the initiator-side extents of
// one pool, `reps` times after one warm-up. REQUIRES: reps >= 1.
ReferenceFigures MemcpyReference(uint8_t* pool, const PoolList& list, const BurstMap& map,
                                 int reps);

// The same pairs copied with cudaMemcpy device to device (pool is a device pointer).
ReferenceFigures DeviceCopyReference(uint8_t* pool, const PoolList& list, const BurstMap& map,
                                     int reps);

// Initiator side of the socket reference: per rep, asks the target for the burst's
// bytes and receives them into the initiator-side extents. The target side must
// run SocketReferenceServe with the same map and reps.
kvlane::Result<ReferenceFigures> SocketReferenceFetch(ControlChannel* control, uint8_t* pool,
                                                      const PoolList& list, const BurstMap& map,
                                                      int reps);
kvlane::Status SocketReferenceServe(ControlChannel* control, const uint8_t* pool,
                                    const PoolList& list, const BurstMap& map, int reps);

}  // namespace kvbench
