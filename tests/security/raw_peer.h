// RawPeer: a hand-driven initiator that speaks the stream wire format byte by
// byte, so that tests can send what a real Agent never would (bad secrets,
// offsets, lengths, keys, truncated frames). Also a guarded buffer whose
// sentinels prove that nothing outside a registered range was written.
// Thread-safety: single-threaded test helpers.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/metadata.h"
#include "transport/stream/socket.h"
#include "transport/stream/wire.h"

namespace kvlane::test {

// What a hostile peer learns from a target's metadata blob.
struct TargetInfo {
  core::AgentMeta meta;
  uint64_t key = 0;   // the first piece's key
  uint64_t base = 0;  // and its range
  uint64_t len = 0;
};
TargetInfo Inspect(const std::string& blob);

class RawPeer {
 public:
  // transport: "tcp" or "shm". Connects without saying Hello.
  static std::optional<RawPeer> Connect(const std::string& transport, const core::AgentMeta& meta);

  // Sends a Hello (+ name unless name is empty). Returns the HelloReply status,
  // or nullopt when the target closed the connection without one.
  std::optional<int32_t> Hello(uint64_t target_id, const core::Secret& secret,
                               uint16_t version = core::kWireVersion, uint32_t magic = core::kHelloMagic,
                               const std::string& name = "evil");
  // Sends raw bytes; false when the connection is already broken.
  bool Send(const void* p, size_t n);
  bool SendFrame(core::FrameType type, uint64_t ticket, const std::vector<core::WireSeg>& segs,
                 uint64_t bytes, const std::string& payload = {});
  // A reply header, or nullopt when the target closed the connection or sent
  // nothing within `timeout`.
  std::optional<core::ReplyHeader> ReadReply(std::chrono::milliseconds timeout = std::chrono::seconds(5));
  bool ReadPayload(void* p, size_t n);
  // True when the target closes the connection within `timeout` (EOF or reset),
  // reading and dropping anything it sent first.
  bool ClosedWithin(std::chrono::milliseconds timeout);
  int fd() const { return fd_.get(); }

 private:
  explicit RawPeer(core::Fd fd) : fd_(std::move(fd)) {}
  core::Fd fd_;
};

// [guard][body][guard], each guard `guard` bytes, all filled with a pattern.
class GuardedBuffer {
 public:
  GuardedBuffer(uint64_t body, uint64_t guard, uint64_t seed);
  uint8_t* body() { return buf_.data() + guard_; }
  uint64_t body_len() const { return body_; }
  // True when both guards still hold their pattern.
  bool GuardsIntact() const;
  // True when the body still holds its pattern.
  bool BodyIntact() const;
  // Re-fills the body with its pattern.
  void ResetBody();

 private:
  uint64_t body_, guard_, seed_;
  std::vector<uint8_t> buf_;
};

}  // namespace kvlane::test
