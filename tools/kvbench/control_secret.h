// The control connection's shared secret (optional): before either rank sends the
// other its plan or its engine metadata, each proves that it holds the secret, so
// a client that reaches rank 0's control port first, or a listener posing as rank 0
// on its own, learns nothing and is not taken for the peer. The proof is HMAC-SHA256
// keyed by the secret over both ranks' hello nonces (fresh for each connection),
// labelled by the rank that sends it: bound to this connection, and not one rank's
// proof reflected back as the other's. Every control message after the proofs
// carries a MAC keyed per direction and connection, with a sequence number: one
// altered, injected, replayed, reordered or dropped on the way ends the run. They
// still travel in the clear, so an attacker on the path who relays both ends' bytes
// reads what follows (docs/SECURITY.md), and the engine's own tcp data is not
// covered. Rank 1 proves first, to whatever answers at --peer: a secret
// of random bytes (head -c 32 /dev/urandom) leaves nothing to guess offline.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "kvlane/status.h"

namespace kvbench {

inline constexpr size_t kMinSecretBytes = 16;
inline constexpr size_t kMaxSecretBytes = 4096;

// The secret in `path` (--secret-file): its bytes as they are, a regular file of
// kMinSecretBytes..kMaxSecretBytes (as read, to its end), owned by this process's
// effective user, that only its owner may read or write (mode & 077 == 0, as ssh
// asks of a private key); not followed through a symbolic link. kInvalidArgument starting with the
// path and what is wrong (missing, another kind of file, size, mode).
kvlane::Result<std::string> ReadSecretFile(const std::string& path);

// `bytes` random bytes from the kernel (getrandom). kBackend if none came.
kvlane::Result<std::string> RandomBytes(size_t bytes);

// A hello's nonce: 32 random bytes as 64 lowercase hex digits.
kvlane::Result<std::string> NewNonce();

// The proof rank `rank` sends: HMAC-SHA256(secret, "kvbench control proof 1 rank
// <rank> <nonce0> <nonce1>") as 64 lowercase hex digits, where nonce0 and nonce1
// are rank 0's and rank 1's hello nonces. Empty if libcrypto failed.
std::string ControlProof(const std::string& secret, int rank, const std::string& nonce0,
                         const std::string& nonce1);

// Whether `theirs` (untrusted: any text) is the proof rank `rank` must send for
// these nonces. Compared in constant time over the expected length; false when
// the expected proof could not be made.
bool ProofMatches(const std::string& secret, int rank, const std::string& nonce0,
                  const std::string& nonce1, const std::string& theirs);

// The key of the MACs rank `rank` puts on the control messages it sends once both
// proofs matched (ControlChannel::Seal): HMAC-SHA256(secret, "kvbench control mac 1
// rank <rank> <nonce0> <nonce1>\n<hellos>"), 32 raw bytes; one per direction and
// per connection. `hellos`: both ranks' hellos as JSON text, rank 0's first, a
// newline between (what each rank sent and read), so a hello altered on the way
// gives the two ranks different keys. Empty if libcrypto failed.
std::string ControlMacKey(const std::string& secret, int rank, const std::string& nonce0,
                          const std::string& nonce1, const std::string& hellos);

// The MAC of the `seq`-th message one direction carries (counted from 0 since the
// seal), `body` its bytes: HMAC-SHA256(key, seq as 8 bytes big-endian || body), 32
// raw bytes. Empty if libcrypto failed.
std::string MessageMac(const std::string& key, uint64_t seq, std::string_view body);

// Whether `theirs` (untrusted) is MessageMac(key, seq, body), compared in constant
// time; false when it could not be made.
bool MessageMacMatches(const std::string& key, uint64_t seq, std::string_view body,
                       std::string_view theirs);

// `bytes` as lowercase hex, and back (nullopt-like: false when `hex` is not an even
// number of lowercase hex digits).
std::string ToHex(const std::string& bytes);
bool FromHex(const std::string& hex, std::string* bytes);

}  // namespace kvbench
