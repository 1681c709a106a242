#include "control_secret.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace kvbench {

kvlane::Result<std::string> ReadSecretFile(const std::string& path) {
  const int raw = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (raw < 0) return kvlane::Status::InvalidArgument(path + ": " + std::strerror(errno));
  struct FdCloser {
    int fd;
    ~FdCloser() { close(fd); }
  } closer{raw};
  struct stat st {};
  if (fstat(raw, &st) != 0)
    return kvlane::Status::InvalidArgument(path + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return kvlane::Status::InvalidArgument(path + ": not a regular file");
  if (st.st_uid != geteuid()) {
    return kvlane::Status::InvalidArgument(path + ": owned by another user (uid " +
                                           std::to_string(st.st_uid) + ")");
  }
  if ((st.st_mode & 077) != 0) {
    return kvlane::Status::InvalidArgument(
        path + ": others may read or write it (chmod 600 it: it holds the control secret)");
  }
  // Read to its end, one byte past the limit at most, and its size checked on
  // what was read (not on fstat's, which the file may have left since).
  std::string secret(kMaxSecretBytes + 1, '\0');
  size_t got = 0;
  for (;;) {
    const ssize_t n = read(raw, secret.data() + got, secret.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return kvlane::Status::InvalidArgument(path + ": " + std::strerror(errno));
    if (n == 0 || (got += static_cast<size_t>(n)) == secret.size()) break;
  }
  if (got < kMinSecretBytes || got > kMaxSecretBytes) {
    return kvlane::Status::InvalidArgument(path + ": a secret is 16 to 4096 bytes; it holds " +
                                           (got > kMaxSecretBytes ? "more" : std::to_string(got)));
  }
  secret.resize(got);
  return secret;
}

kvlane::Result<std::string> RandomBytes(size_t bytes) {
  std::string out(bytes, '\0');
  size_t got = 0;
  while (got < bytes) {
    const ssize_t n = getrandom(out.data() + got, bytes - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return kvlane::Status::Backend(std::string("getrandom: ") + std::strerror(errno));
    got += static_cast<size_t>(n);
  }
  return out;
}

kvlane::Result<std::string> NewNonce() {
  KVLANE_ASSIGN_OR_RETURN(std::string bytes, RandomBytes(32));
  return ToHex(bytes);
}

namespace {

// HMAC-SHA256 of `data` keyed by `key`: 32 raw bytes, or empty.
std::string Hmac(const std::string& key, std::string_view data) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
           reinterpret_cast<const unsigned char*>(data.data()), data.size(), mac,
           &len) == nullptr ||
      len != 32) {
    return {};
  }
  return std::string(reinterpret_cast<const char*>(mac), len);
}

// Whether `theirs` (untrusted) is `want`, compared in constant time over
// want's length; false when `want` is empty (it could not be made).
bool Matches(std::string_view want, std::string_view theirs) {
  return !want.empty() && theirs.size() == want.size() &&
         CRYPTO_memcmp(theirs.data(), want.data(), want.size()) == 0;
}

}  // namespace

std::string ControlProof(const std::string& secret, int rank, const std::string& nonce0,
                         const std::string& nonce1) {
  // Empty when HMAC failed (ToHex of nothing): ProofMatches matches nothing against it.
  return ToHex(Hmac(secret, "kvbench control proof 1 rank " + std::to_string(rank) + " " + nonce0 +
                                " " + nonce1));
}

bool ProofMatches(const std::string& secret, int rank, const std::string& nonce0,
                  const std::string& nonce1, const std::string& theirs) {
  return Matches(ControlProof(secret, rank, nonce0, nonce1), theirs);
}

std::string ControlMacKey(const std::string& secret, int rank, const std::string& nonce0,
                          const std::string& nonce1, const std::string& hellos) {
  return Hmac(secret, "kvbench control mac 1 rank " + std::to_string(rank) + " " + nonce0 + " " +
                          nonce1 + "\n" + hellos);
}

std::string MessageMac(const std::string& key, uint64_t seq, std::string_view body) {
  std::string data(8, '\0');
  for (int i = 0; i < 8; ++i) data[i] = static_cast<char>(seq >> (56 - 8 * i));
  data.append(body);
  return Hmac(key, data);
}

bool MessageMacMatches(const std::string& key, uint64_t seq, std::string_view body,
                       std::string_view theirs) {
  return Matches(MessageMac(key, seq, body), theirs);
}

std::string ToHex(const std::string& bytes) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) out += {kDigits[c >> 4], kDigits[c & 15]};
  return out;
}

bool FromHex(const std::string& hex, std::string* bytes) {
  auto nibble = [](char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
  };
  if (hex.size() % 2 != 0) return false;
  std::string out;
  out.reserve(hex.size() / 2);
  for (size_t i = 0; i < hex.size(); i += 2) {
    const int hi = nibble(hex[i]), lo = nibble(hex[i + 1]);
    if (hi < 0 || lo < 0) return false;
    out.push_back(static_cast<char>(hi << 4 | lo));
  }
  *bytes = std::move(out);
  return true;
}

}  // namespace kvbench
