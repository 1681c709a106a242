// --inject-fault (testing only): "flip-byte:N" flips one byte of one received
// payload in measured iteration N of every run, after it landed and before it is
// verified, so that a run shows that its verification catches corruption: that
// iteration fails verification, the run is invalid and lanebench exits 1. The
// name and value follow kvbench's --inject-fault flip-byte. Free functions.
#pragma once

#include <cstdint>
#include <string>

#include "kvlane/status.h"
#include "source_rig.h"

namespace lanebench {

// The measured iteration (1-based) whose payload `fault` has flipped: 0 for "none",
// N for "flip-byte:N", 1 for "flip-byte". InvalidArgument naming --inject-fault for
// anything else, or an N outside 1..iters.
kvlane::Result<int> FlipByteIteration(const std::string& fault, int iters);

// Flips one byte (the middle one) of the iteration's first transfer (the bulk one of
// the mixed shape) where it landed: in this source's buffer for a read, in the
// target's for a write (told by a "flip" message, answered "flipped <epoch>").
kvlane::Status FlipOneReceivedByte(SourceRig& rig, uint64_t epoch);

// Flips byte `at` of `buf` in `space` (through a one-byte host copy, so device memory too).
kvlane::Status FlipByteAt(BufferSpace& space, uint8_t* buf, uint64_t at);

}  // namespace lanebench
