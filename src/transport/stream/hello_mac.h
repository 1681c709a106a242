// HMAC-SHA256 (OpenSSL libcrypto) and the two proofs of the stream handshake
// (docs/SECURITY.md): the initiator proves it holds the target's secret by a MAC
// over both nonces, and the target answers with a MAC of its own, so the secret
// itself never travels and a captured Hello is worthless on another connection.
//
// Pure functions: thread-safe, no state.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string_view>

#include "core/metadata.h"
#include "transport/stream/wire.h"

namespace kvlane::core {

// HMAC-SHA256 (RFC 2104) under `key` of the concatenation of `parts`.
// Aborts if libcrypto fails (it cannot for SHA-256 short of running out of memory).
Mac HmacSha256(std::span<const uint8_t> key, std::initializer_list<std::span<const uint8_t>> parts);

// Equality in time independent of the contents (CRYPTO_memcmp).
bool MacEquals(const Mac& a, const Mac& b);

// The initiator's proof, sent in the Hello:
//   HMAC(secret, "kvlane-hello-v1" || server || client || agent_id || version || name)
// with agent_id 8 bytes and version 2 bytes, little-endian. `name` comes last, so
// the concatenation is unambiguous.
Mac HelloProof(const Secret& secret, const Nonce& server, const Nonce& client, uint64_t agent_id,
               uint16_t version, std::string_view name);

// The target's proof, sent in the Hello reply once the initiator's proof held:
//   HMAC(secret, "kvlane-ready-v1" || client || server || agent_id)
// Its distinct label keeps it from ever equalling a HelloProof (no reflection).
Mac ReadyProof(const Secret& secret, const Nonce& client, const Nonce& server, uint64_t agent_id);

}  // namespace kvlane::core
