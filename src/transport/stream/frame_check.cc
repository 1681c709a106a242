#include "transport/stream/frame_check.h"

#include "core/plain_text.h"
#include "transport/stream/hello_mac.h"

namespace kvlane::core {

Status CheckHello(const StreamHello& h, std::string_view name, uint64_t agent_id,
                  const Secret& secret, const Nonce& server_nonce) {
  // Over the fields as sent: a proof for another id, version or name fails too.
  Mac want = HelloProof(secret, server_nonce, h.nonce, h.target_id, h.version, name);
  bool ok = MacEquals(want, h.proof);  // always compared: no early exit on the proof
  ok = ok && h.magic == kHelloMagic && h.version == kWireVersion && h.target_id == agent_id &&
       h.name_len > 0 && name.size() == h.name_len;
  if (!ok) return Status::NotAllowed("hello rejected: wrong agent id, proof or version");
  // A proven peer's name, checked as its metadata's was: it reaches
  // notifications, errors and bindings.
  if (!IsPlainText(name))
    return Status::NotAllowed("hello rejected: the peer's name is not plain text");
  return Status::Ok();
}

Status CheckFrameHeader(const FrameHeader& h) {
  switch (static_cast<FrameType>(h.type)) {
    case FrameType::kRead:
    case FrameType::kWrite:
      if (h.nseg == 0 || h.nseg > kMaxWireSegs || h.bytes == 0 || h.bytes > kMaxFrameBytes)
        return Status::InvalidArgument("protocol: bad frame size");
      return Status::Ok();
    case FrameType::kNotify:
      if (h.nseg != 0 || h.bytes > kMaxNotifyBytes) return Status::InvalidArgument("protocol: bad notify");
      return Status::Ok();
    case FrameType::kNop:
      if (h.nseg != 0 || h.bytes != 0) return Status::InvalidArgument("protocol: bad nop");
      return Status::Ok();
  }
  return Status::InvalidArgument("protocol: unknown frame type");
}

Status CheckSegments(const FrameHeader& h, std::span<const WireSeg> segs) {
  if (segs.size() != h.nseg) return Status::InvalidArgument("protocol: segment count mismatch");
  uint64_t sum = 0;  // at most kMaxWireSegs * kMaxFrameBytes: cannot wrap
  for (const WireSeg& s : segs) {
    if (s.len == 0 || s.len > kMaxFrameBytes) return Status::InvalidArgument("protocol: bad segment length");
    sum += s.len;
  }
  if (sum != h.bytes) return Status::InvalidArgument("protocol: segment lengths do not add up");
  return Status::Ok();
}

}  // namespace kvlane::core
