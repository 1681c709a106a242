#include "transport/stream/hello_mac.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace kvlane::core {
namespace {

constexpr std::string_view kHelloLabel = "kvlane-hello-v1";
constexpr std::string_view kReadyLabel = "kvlane-ready-v1";

std::span<const uint8_t> Bytes(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

template <size_t N>
std::array<uint8_t, N> LittleEndian(uint64_t v) {
  std::array<uint8_t, N> out{};
  for (size_t i = 0; i < N; ++i) out[i] = static_cast<uint8_t>(v >> (8 * i));
  return out;
}

}  // namespace

Mac HmacSha256(std::span<const uint8_t> key,
               std::initializer_list<std::span<const uint8_t>> parts) {
  std::vector<uint8_t> msg;
  for (std::span<const uint8_t> p : parts) msg.insert(msg.end(), p.begin(), p.end());
  Mac out{};
  unsigned int len = 0;
  if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), msg.data(), msg.size(),
           out.data(), &len) == nullptr ||
      len != out.size()) {
    std::fprintf(stderr, "kvlane: HMAC-SHA256 failed in libcrypto\n");
    std::abort();
  }
  return out;
}

bool MacEquals(const Mac& a, const Mac& b) {
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

Mac HelloProof(const Secret& secret, const Nonce& server, const Nonce& client, uint64_t agent_id,
               uint16_t version, std::string_view name) {
  const auto id = LittleEndian<8>(agent_id);
  const auto ver = LittleEndian<2>(version);
  return HmacSha256(secret, {Bytes(kHelloLabel), server, client, id, ver, Bytes(name)});
}

Mac ReadyProof(const Secret& secret, const Nonce& client, const Nonce& server, uint64_t agent_id) {
  const auto id = LittleEndian<8>(agent_id);
  return HmacSha256(secret, {Bytes(kReadyLabel), client, server, id});
}

}  // namespace kvlane::core
