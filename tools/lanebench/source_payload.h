// The source's work on payloads outside its timed region (source.cc times what is
// between): staging before it; after it, the overwrite of what the transfers moved
// from, then the check against the oracle (oracle.h). The targets do their part on
// request (target.cc). Free functions over the source's rig, on its one thread.
//
// Why the overwrite: completion means the transport is done with both buffers
// (docs/DESIGN.md: the terminal record is published once the data is visible at
// the peer). A transport that reports completion early and
// still moves bytes afterwards would otherwise move the right bytes and pass: the
// source buffer keeps its payload until the next staging, and a write is checked
// at the target only after a control round trip. Once the sending side is
// overwritten, every byte moved after completion carries the wrong pattern.
#pragma once

#include <cstdint>
#include <string>

#include "kvlane/status.h"
#include "source_rig.h"

namespace lanebench {

// An epoch no iteration has (epochs count from 1 up to about 2 x 10^6): a read's
// target regions are filled for it after the timed region.
inline constexpr uint64_t kScrubEpochBit = uint64_t{1} << 63;

// Before the timed region: the side each transfer moves from holds epoch's payload
// (read: the targets' regions, filled on request; write: this source's buffers), the
// side it moves to a wipe (read: this source's buffers; write: the targets' regions
// still hold an earlier epoch's payload, whose marker differs).
kvlane::Status Stage(SourceRig& rig, uint64_t epoch);

// Right after the timed region. Write: this source's buffers are overwritten
// with a sentinel byte. Read: this source's buffers are checked first (a byte not
// landed at completion still holds the wipe), then every target's region is filled
// anew for epoch | kScrubEpochBit. Returns that first check's failure ("" when none;
// always "" for a write).
kvlane::Result<std::string> Overwrite(SourceRig& rig, uint64_t epoch);

// After Overwrite: "" when every payload matches epoch's oracle, else the first
// failure ("small: first bad byte at offset 2048"). Write: each target checks its
// region. Read: this source's buffers again; a byte that differs now changed after
// the first check, so it says "(moved after completion)".
kvlane::Result<std::string> Verify(SourceRig& rig, uint64_t epoch);

}  // namespace lanebench
