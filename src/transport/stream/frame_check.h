// Pure checks of what an untrusted initiator sends on a stream connection: the
// Hello and the frames. No sockets and no registry, so that they can be fuzzed
// (fuzz/frame_fuzz.cc); FrameExecutor calls them before it touches memory.
#pragma once

#include <cstdint>
#include <span>

#include "core/metadata.h"
#include "kvlane/status.h"
#include "transport/stream/wire.h"

namespace kvlane::core {

// NotAllowed unless the Hello names this agent (id), carries its secret, speaks
// our wire version and announces a non-empty name. Constant time in the secret.
Status CheckHello(const HelloFrame& h, uint64_t agent_id, const Secret& secret);

// Checks a frame header before anything that follows it is read: a known type,
// and sizes within the wire limits for that type.
Status CheckFrameHeader(const FrameHeader& h);

// REQUIRES: CheckFrameHeader(h) ok and segs.size() == h.nseg (kRead / kWrite).
// Every segment non-empty and bounded, and the lengths add up to h.bytes.
Status CheckSegments(const FrameHeader& h, std::span<const WireSeg> segs);

}  // namespace kvlane::core
