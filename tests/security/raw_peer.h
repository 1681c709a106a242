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

  // Reads the target's challenge, then sends a Hello (+ name unless name is
  // empty) whose proof is made with `secret` for that challenge. Returns the
  // reply's status, or nullopt when the target closed the connection without
  // one. A status 0 reply must carry the target's proof for `secret`, else the
  // test fails. The bytes sent are kept (last_hello()).
  std::optional<int32_t> Hello(uint64_t target_id, const core::Secret& secret,
                               uint16_t version = core::kWireVersion, uint32_t magic = core::kHelloMagic,
                               const std::string& name = "evil");
  // Reads the challenge and sends `hello` as is (e.g. one captured from another
  // connection). Returns the reply's status, or nullopt as above.
  std::optional<int32_t> SendHello(const std::string& hello);
  const std::string& last_hello() const { return last_hello_; }
  // Why the last Hello reply refused us (StreamHelloReply::refusal; 0 if none came).
  uint32_t last_refusal() const { return last_refusal_; }
  // The challenge, or nullopt when none came within `timeout`.
  std::optional<core::ChallengeFrame> ReadChallenge(
      std::chrono::milliseconds timeout = std::chrono::seconds(5));
  // Sends raw bytes; false when the connection is already broken.
  bool Send(const void* p, size_t n);
  bool SendFrame(core::FrameType type, uint64_t ticket, const std::vector<core::WireSeg>& segs,
                 uint64_t bytes, const std::string& payload = {});
  // Sends a WRITE of `segs` (with `bytes` of 0x5a payload inline unless `cma`)
  // and returns the reply's code, or nullopt when the connection was closed instead.
  std::optional<int32_t> Write(const std::vector<core::WireSeg>& segs, uint64_t bytes, bool cma);
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
  std::optional<core::StreamHelloReply> ReadHelloReply();
  core::Fd fd_;
  std::string last_hello_;
  uint32_t last_refusal_ = 0;
};

// Plays the target's side of the handshake on an accepted connection, as a fake
// target: sends a challenge, reads any Hello and its name, and accepts it with
// the reply proof for (agent_id, secret) — with a secret other than the one in
// the blob the initiator loaded, an impostor. False when the connection broke.
bool AcceptAnyHello(int fd, uint64_t agent_id, const core::Secret& secret);

// Who a fake tcp target is: a random agent id and secret (for AcceptAnyHello),
// and the blob an initiator loads to reach it at 127.0.0.1:`port`.
struct FakeTargetId {
  FakeTargetId();
  std::string Blob(const std::string& name, uint16_t port,
                   std::vector<core::Piece> pieces = {}) const;
  uint64_t agent_id;
  core::Secret secret;
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
