// --inject-fault (testing only): "flip-byte:N" flips one byte of one received
// payload in measured iteration N of every run, after it landed and before it is
// verified, so that a run shows that its verification catches corruption: that
// iteration fails verification, the run is invalid and lanebench exits 1. The
// name and value follow kvbench's --inject-fault flip-byte; "flip-byte:N:small"
// (or ":bulk", the mixed shape only) names the transfer whose payload is flipped.
// "repost:N" posts iteration N's transfers again after the source saw them complete
// and overwrote what they moved from (source_payload.h), as a transport still
// moving bytes after it reported completion would: the moved bytes then carry
// the overwrite's pattern, and that iteration must fail its verification too.
// "stop-peer:N" (":bulk|small": that transfer's) stops the target of the
// iteration's first transfer (SIGSTOP) just before its timed region: the transfer
// never completes, and the source must give up at its deadline, naming it, with
// the samples of the iterations before (source.cc). Free functions.
#pragma once

#include <cstdint>
#include <string>

#include "kvlane/status.h"
#include "source_rig.h"
#include "spec.h"

namespace lanebench {

// `text` parsed: "none"; "flip-byte" (iteration 1); "flip-byte:N" (the run's first
// transfer); "flip-byte:N:bulk|small" (REQUIRES shape "mixed"); "repost:N";
// "stop-peer:N" and "stop-peer:N:bulk|small" (the same). N is a measured iteration,
// 1..iters. InvalidArgument naming --inject-fault for anything else.
kvlane::Result<FaultSpec> ParseFault(const std::string& text, int iters, const std::string& shape);

// Flips one byte (the middle one) of the iteration's transfer `rig.spec.fault.xfer`
// (the first when empty) where it landed: in this source's buffer for a read, in the
// target's for a write (told by a "flip" message, answered "flipped <epoch>").
kvlane::Status FlipOneReceivedByte(SourceRig& rig, uint64_t epoch);

// Posts every transfer of the rig again and waits for each to end (by rig.deadline).
// REQUIRES: their previous posts have finished.
kvlane::Status RepostAll(SourceRig& rig);

// Stops (SIGSTOP) the target of transfer `rig.spec.fault.xfer` (the first when
// empty) and waits, by rig.deadline, until it is stopped. The orchestrator kills it.
kvlane::Status StopPeer(SourceRig& rig);

// Flips byte `at` of `buf` in `space` (through a one-byte host copy, so device memory too).
kvlane::Status FlipByteAt(BufferSpace& space, uint8_t* buf, uint64_t at);

}  // namespace lanebench
