#include "core/plain_text.h"

#include <cstdint>

namespace kvlane::core {
namespace {

// Length of the plain character at s[i] (1..4), or 0 when the bytes there are
// not one.
size_t PlainCharAt(std::string_view s, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  const uint8_t b = byte(i);
  if (b < 0x80) return (b >= 0x20 && b != 0x7F) ? 1 : 0;
  size_t n;
  uint32_t cp;
  if (b >= 0xC2 && b <= 0xDF) {
    n = 2;
    cp = b & 0x1F;
  } else if (b >= 0xE0 && b <= 0xEF) {
    n = 3;
    cp = b & 0x0F;
  } else if (b >= 0xF0 && b <= 0xF4) {
    n = 4;
    cp = b & 0x07;
  } else {
    return 0;  // a continuation byte, C0/C1 (overlong two-byte forms) or F5..FF
  }
  if (s.size() - i < n) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (byte(i + k) & 0x3F);
  }
  static constexpr uint32_t kShortest[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kShortest[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  if (cp <= 0x9F) return 0;  // C1 controls (U+0080..U+009F)
  // Line and paragraph separators, and the bidirectional marks, embeddings,
  // overrides and isolates: they reorder or break what a terminal shows.
  if (cp == 0x2028 || cp == 0x2029 || (cp >= 0x202A && cp <= 0x202E) ||
      (cp >= 0x2066 && cp <= 0x2069) || cp == 0x200E || cp == 0x200F || cp == 0x061C)
    return 0;
  return n;
}

}  // namespace

bool IsPlainText(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const size_t n = PlainCharAt(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

Status CheckAgentName(std::string_view name, std::string_view what) {
  if (name.empty() || name.size() > 255)
    return Status::InvalidArgument(std::string(what) + ": an agent name is 1..255 bytes, got " +
                                   std::to_string(name.size()));
  if (!IsPlainText(name))
    return Status::InvalidArgument(
        std::string(what) +
        ": an agent name is UTF-8 text without control or bidi characters, got '" +
        PlainTextOf(name) + "'");
  return Status::Ok();
}

std::string PlainTextOf(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const size_t n = PlainCharAt(s, i);
    if (n == 0) {
      out.push_back('?');
      ++i;
    } else {
      out.append(s.substr(i, n));
      i += n;
    }
  }
  return out;
}

}  // namespace kvlane::core
