// AgentMeta: what one agent tells its peers (identity, secret, endpoints,
// pieces), and its wire encoding. Decoding treats the blob as untrusted.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/piece.h"
#include "kvlane/status.h"

namespace kvlane::core {

inline constexpr uint32_t kMetaMagic = 0x4d4c564b;  // "KVLM"
// 2: each piece carries its Access (read-only regions). A blob of another
// version is refused with an error naming both versions, never misparsed.
inline constexpr uint16_t kMetaVersion = 2;
inline constexpr uint32_t kMaxMetaPieces = 1u << 20;

using Secret = std::array<uint8_t, 16>;

struct AgentMeta {
  std::string name;
  uint64_t agent_id = 0;
  Secret secret{};           // proves a connecting peer loaded this blob
  uint64_t process_token = 0;  // same value: same process ("local" transport)
  uint32_t pid = 0;
  std::string hostname;
  std::string boot_id;       // same value: same host ("shm" transport)
  std::string tcp_host;      // empty: no tcp listener
  uint16_t tcp_port = 0;
  std::string shm_socket;    // abstract unix socket name; empty: none
  std::string cuda_blob;     // opaque cuda transport section (IPC handles); may be empty
  std::vector<Piece> pieces;  // sorted by base
};

std::string EncodeMeta(const AgentMeta& meta);
// InvalidArgument on any malformed, truncated or inconsistent blob.
Result<AgentMeta> DecodeMeta(std::string_view blob);

}  // namespace kvlane::core
