// The stream wire format shared by tcp and shm. Every connection opens with a
// Hello that proves the initiator loaded the target's metadata (its secret).
// Then frames flow initiator -> target and replies flow back, in order.
// All integers little-endian (x86-64 / aarch64 hosts); structs are POD.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace kvlane::core {

inline constexpr uint32_t kHelloMagic = 0x484c564b;  // "KVLH"
inline constexpr uint16_t kWireVersion = 1;
inline constexpr uint32_t kMaxWireSegs = 1024;
inline constexpr uint64_t kMaxFrameBytes = 1ull << 30;
inline constexpr uint64_t kMaxNotifyBytes = 64u << 10;
inline constexpr uint32_t kMaxPeerName = 255;

enum class ConnRole : uint8_t { kLane = 1, kControl = 2 };

inline constexpr size_t kNonceBytes = 32;
using Nonce = std::array<uint8_t, kNonceBytes>;  // fresh random bytes per connection
using Mac = std::array<uint8_t, 32>;             // HMAC-SHA256

struct HelloFrame {
  uint32_t magic;
  uint16_t version;
  uint8_t role;  // ConnRole
  uint8_t name_len;
  uint64_t target_id;
  uint8_t secret[16];
  // followed by name_len bytes: the initiator's agent name
};
static_assert(sizeof(HelloFrame) == 32);

struct HelloReply {
  int32_t status;  // Code
  uint32_t reserved;
};

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
  uint32_t reserved;
  uint64_t bytes;  // payload that follows (tcp kRead success)
};
static_assert(sizeof(ReplyHeader) == 24);

}  // namespace kvlane::core
