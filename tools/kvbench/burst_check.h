// Verification of one burst, outside the timed region: wipe the landing side's
// descriptors with the sentinel, fill the source side's with the pattern, and
// check every landed byte against the pattern of its source. Pure functions over
// a pool base pointer; thread-compatible. Each takes an optional StopCheck, asked
// between extents (StopPacer): once it answers true the function returns at once,
// its work unfinished (a wipe or fill partway, a partial VerifyResult); the caller,
// whose StopCheck answered, knows to drop the result.
#pragma once

#include <cstdint>
#include <vector>

#include "burst_map.h"
#include "pattern.h"
#include "stop_check.h"

namespace kvbench {

using RequestIndices = std::vector<std::vector<uint32_t>>;  // [request][pair]

// Fills the pattern of (rank, epoch) into every extent named by `indices`.
void FillSources(uint8_t* pool, const PoolList& list, const RequestIndices& indices, uint32_t rank,
                 uint64_t epoch, const StopCheck& stop = {});
// Wipes every extent named by `indices` with the sentinel.
void WipeDestinations(uint8_t* pool, const PoolList& list, const RequestIndices& indices,
                      const StopCheck& stop = {});
// Checks each destination extent against the pattern of its paired source extent.
// first_mismatch is a destination pool offset.
VerifyResult VerifyDestinations(const uint8_t* pool, const PoolList& list,
                                const RequestIndices& dst, const RequestIndices& src,
                                uint32_t src_rank, uint64_t epoch, const StopCheck& stop = {});

// Fault injection for self-tests: flips one byte of the first destination extent.
void FlipOneLandedByte(uint8_t* pool, const PoolList& list, const RequestIndices& dst);

}  // namespace kvbench
