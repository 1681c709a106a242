// Pure checks of what an untrusted initiator sends on a stream connection: the
// Hello and the frames. No sockets and no registry, so that they can be fuzzed
// (fuzz/frame_fuzz.cc); FrameExecutor calls them before it touches memory.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "core/metadata.h"
#include "kvlane/status.h"
#include "transport/stream/wire.h"

namespace kvlane::core {

// NotAllowed unless the Hello names this agent (id), speaks our wire version,
// announces a non-empty name (`name`, the name_len bytes that followed it) and
// carries the proof that its sender holds `secret`, made for this connection's
// challenge `server_nonce`. The proof is always computed and compared in
// constant time (no early exit on it).
Status CheckHello(const StreamHello& h, std::string_view name, uint64_t agent_id,
                  const Secret& secret, const Nonce& server_nonce);

// Checks a frame header before anything that follows it is read: a known type,
// and sizes within the wire limits for that type.
Status CheckFrameHeader(const FrameHeader& h);

// REQUIRES: CheckFrameHeader(h) ok and segs.size() == h.nseg (kRead / kWrite).
// Every segment non-empty and bounded, and the lengths add up to h.bytes.
Status CheckSegments(const FrameHeader& h, std::span<const WireSeg> segs);

}  // namespace kvlane::core
