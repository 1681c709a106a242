// Text a tool received from another process (a peer rank, a child's result
// file), made fit to quote or parse: Printable cuts it and keeps it to printable
// ASCII; JsonDepth tells JSON nested too deeply to parse safely. Header-only;
// pure functions; thread-safe.
#pragma once

#include <algorithm>
#include <string>
#include <string_view>

namespace kvlane_tools {

// The deepest nesting a tool takes in JSON from another process: deeper than
// any message or file the tools write (kvbench's plan: 6 levels).
inline constexpr int kMaxJsonDepth = 32;

// `text` with each byte that is not printable ASCII replaced by '?', cut to
// `max_bytes` ("..." then ends it).
inline std::string Printable(const std::string& text, size_t max_bytes) {
  std::string out;
  for (char c : text) {
    if (out.size() == max_bytes) return out + "...";
    out.push_back(c >= 0x20 && c < 0x7f ? c : '?');
  }
  return out;
}

// The deepest nesting of arrays and objects in JSON text `text` (brackets
// inside strings do not count), found without parsing: a peer's message nested
// deeper than a limit is refused before nlohmann's recursive dump or copy of it
// could overflow the stack. Linear; malformed text is the parser's to refuse.
inline int JsonDepth(std::string_view text) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') in_string = true;
    if (c == '[' || c == '{') deepest = std::max(deepest, ++depth);
    if (c == ']' || c == '}') --depth;
  }
  return deepest;
}

}  // namespace kvlane_tools
