// The stream wire format shared by tcp and shm. Every connection opens with a
// handshake in which each side proves it holds the target's secret (from its
// metadata) without sending it: the target sends a ChallengeFrame, the initiator
// answers with a StreamHello, the target with a StreamHelloReply (proofs:
// transport/stream/hello_mac.h). Then frames flow initiator -> target and
// replies flow back, in order. The cuda transport's control socket opens with
// the same handshake (transport/cuda/cuda_control.h), then speaks frames of its own.
// All integers little-endian (x86-64 / aarch64 hosts); structs are POD.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace kvlane::core {

inline constexpr uint32_t kHelloMagic = 0x484c564b;      // "KVLH"
inline constexpr uint32_t kChallengeMagic = 0x434c564b;  // "KVLC"
// 2: challenge-response handshake. 1 sent the secret in the Hello; a peer of
// version 1 is refused (its Hello fails the version check). 3: the same
// handshake; tcp replies may carry a status trailer (kReplyStatusAfter), and a
// cuda channel opens with a live-key check (transport/cuda/cuda_control.h). A
// peer of another version is refused with an error that names both.
inline constexpr uint16_t kWireVersion = 3;
inline constexpr uint32_t kMaxWireSegs = 1024;
inline constexpr uint64_t kMaxFrameBytes = 1ull << 30;
inline constexpr uint64_t kMaxNotifyBytes = 64u << 10;
inline constexpr uint32_t kMaxPeerName = 255;

// What the initiator opens the connection for. Not covered by the proof, and no
// target acts on it: it names the connection in a capture.
enum class ConnRole : uint8_t {
  kLane = 1,         // a stream lane
  kControl = 2,      // a stream channel's control connection (notifications)
  kCudaControl = 3,  // the cuda transport's control socket (transport/cuda/cuda_control.h)
};

inline constexpr size_t kNonceBytes = 32;
using Nonce = std::array<uint8_t, kNonceBytes>;  // fresh random bytes per connection
using Mac = std::array<uint8_t, 32>;             // HMAC-SHA256

// Target -> initiator: the first bytes of every stream connection.
struct ChallengeFrame {
  uint32_t magic;    // kChallengeMagic
  uint16_t version;  // kWireVersion
  uint16_t reserved;
  Nonce nonce;  // the target's (server) nonce
};
static_assert(sizeof(ChallengeFrame) == 40);

// Initiator -> target, once the challenge arrived. magic and version lead, as in
// version 1, so that an older peer's Hello is refused on its first 8 bytes.
struct StreamHello {
  uint32_t magic;  // kHelloMagic
  uint16_t version;
  uint8_t role;  // ConnRole
  uint8_t name_len;
  uint64_t target_id;
  Nonce nonce;  // the initiator's (client) nonce
  Mac proof;    // HelloProof(secret, challenge nonce, nonce, target_id, version, name)
  // followed by name_len bytes: the initiator's agent name
};
static_assert(sizeof(StreamHello) == 80);
inline constexpr size_t kHelloPrefixBytes = offsetof(StreamHello, target_id);

// Why a target refused a Hello (StreamHelloReply::refusal). Targets before this
// field sent 0 there, and initiators before it ignore it: no version change.
enum class HelloRefusal : uint32_t {
  kUnspecified = 0,    // the Hello failed its checks (id, version, name, proof)
  kPeerConnLimit = 1,  // a valid Hello, but its peer name holds max_conns_per_peer already
};

// Target -> initiator: the verdict, then the connection is closed on refusal.
struct StreamHelloReply {
  int32_t status;    // Code
  uint32_t refusal;  // HelloRefusal when status != 0; else 0
  // status 0: ReadyProof(secret, client nonce, server nonce, target_id); else zeros
  Mac proof;
};
static_assert(sizeof(StreamHelloReply) == 40);

enum class FrameType : uint8_t { kRead = 1, kWrite = 2, kNotify = 3, kNop = 4 };

struct FrameHeader {
  uint8_t type;  // FrameType
  uint8_t reserved[3];
  uint32_t nseg;
  uint64_t ticket;
  uint64_t bytes;  // sum of segment lengths (kNotify: payload length)
  // followed by nseg WireSeg, then (tcp kWrite / kNotify) `bytes` of payload
};
static_assert(sizeof(FrameHeader) == 24);

struct WireSeg {
  uint64_t key;        // target piece key
  uint64_t addr;       // target address
  uint64_t len;
  uint64_t peer_addr;  // initiator address (shm: the target copies through CMA); 0 for tcp
};

struct ReplyHeader {
  uint64_t ticket;
  int32_t status;  // Code
  uint32_t flags;  // kReplyStatusAfter, or 0
  uint64_t bytes;  // payload that follows (tcp kRead success)
};
static_assert(sizeof(ReplyHeader) == 24);

// ReplyHeader::flags: a StatusTrailer follows the payload. A target staging a
// READ from device memory sends it: a copy that fails after the header went
// out voids the payload (sent as filler) instead of breaking the stream.
inline constexpr uint32_t kReplyStatusAfter = 1;

struct StatusTrailer {
  int32_t status;  // Code: 0, or why the payload before it is void
  uint32_t reserved;
};
static_assert(sizeof(StatusTrailer) == 8);

}  // namespace kvlane::core
