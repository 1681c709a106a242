// Little-endian byte writer and a bounds-checked reader for untrusted input.
// Thread-safety: single-threaded values.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace kvlane::core {

class ByteWriter {
 public:
  template <typename T>
  void Put(T v) {
    static_assert(std::is_trivially_copyable_v<T>);
    out_.append(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  // Length-prefixed (u32) string.
  void PutString(std::string_view s) {
    Put<uint32_t>(static_cast<uint32_t>(s.size()));
    out_.append(s.data(), s.size());
  }
  void PutRaw(const void* p, size_t n) { out_.append(static_cast<const char*>(p), n); }
  std::string& str() { return out_; }

 private:
  std::string out_;
};

// Every read checks the remaining length; after the first failure ok() is false
// and all further reads return zero values.
class ByteReader {
 public:
  explicit ByteReader(std::string_view in) : in_(in) {}

  template <typename T>
  T Get() {
    T v{};
    if (!ok_ || in_.size() - pos_ < sizeof(T)) {
      ok_ = false;
      return v;
    }
    std::memcpy(&v, in_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  // REQUIRES: max_len bounds what the caller is willing to accept.
  std::string GetString(uint32_t max_len) {
    uint32_t n = Get<uint32_t>();
    if (!ok_ || n > max_len || in_.size() - pos_ < n) {
      ok_ = false;
      return {};
    }
    std::string s(in_.substr(pos_, n));
    pos_ += n;
    return s;
  }
  bool GetRaw(void* p, size_t n) {
    if (!ok_ || in_.size() - pos_ < n) return ok_ = false;
    std::memcpy(p, in_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  bool ok() const { return ok_; }
  size_t remaining() const { return in_.size() - pos_; }

 private:
  std::string_view in_;
  size_t pos_ = 0;
  bool ok_ = true;
};

}  // namespace kvlane::core
