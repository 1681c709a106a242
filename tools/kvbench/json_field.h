// Reading one field of a peer's control message, which is untrusted input: a
// field that is missing or of another type reads as absent, never throws.
#pragma once

#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "common/json_text.h"

namespace kvbench {

using kvlane_tools::JsonDepth;
using kvlane_tools::Printable;

// m[key] when m is an object holding it with T's JSON type (bool, an integer, a
// non-negative integer for uint64_t, a string), else nullopt.
template <typename T>
std::optional<T> TypedField(const nlohmann::json& m, const char* key) {
  static_assert(std::is_same_v<T, bool> || std::is_same_v<T, int64_t> ||
                    std::is_same_v<T, uint64_t> || std::is_same_v<T, std::string>,
                "bool, int64_t, uint64_t or std::string");
  if (!m.is_object()) return std::nullopt;
  auto it = m.find(key);
  if (it == m.end()) return std::nullopt;
  bool fits = false;
  if constexpr (std::is_same_v<T, bool>) fits = it->is_boolean();
  if constexpr (std::is_same_v<T, int64_t>) fits = it->is_number_integer();
  if constexpr (std::is_same_v<T, uint64_t>) {  // parsed, a non-negative one is unsigned
    fits = it->is_number_unsigned() || (it->is_number_integer() && it->get<int64_t>() >= 0);
  }
  if constexpr (std::is_same_v<T, std::string>) fits = it->is_string();
  if (!fits) return std::nullopt;
  return it->get<T>();
}

// A peer's free text (a signal's name) fit to quote in a message or a document:
// m[key] when it is a string, each byte that is not printable ASCII replaced by '?'
// and cut to `max_bytes` ("..." then ends it); `absent` when missing or not a string.
inline std::string PeerText(const nlohmann::json& m, const char* key, size_t max_bytes,
                            const std::string& absent) {
  std::optional<std::string> text = TypedField<std::string>(m, key);
  return text.has_value() ? Printable(*text, max_bytes) : absent;
}

// A peer's JSON value fit to quote: its compact text as Printable.
inline std::string PeerJson(const nlohmann::json& v, size_t max_bytes) {
  return Printable(v.dump(-1, ' ', true, nlohmann::json::error_handler_t::replace), max_bytes);
}

// The strings of a peer's array `list` (its other elements skipped), at most
// `max_items` of them, each as Printable of `max_bytes`; none when not an array.
inline std::vector<std::string> PeerStrings(const nlohmann::json& list, size_t max_items,
                                            size_t max_bytes) {
  std::vector<std::string> out;
  if (!list.is_array()) return out;
  for (const nlohmann::json& s : list)
    if (s.is_string() && out.size() < max_items)
      out.push_back(Printable(s.get<std::string>(), max_bytes));
  return out;
}

// m[key] when m is an object holding it, else null (never throws, never inserts).
inline const nlohmann::json& FieldOrNull(const nlohmann::json& m, const char* key) {
  static const nlohmann::json kNull;
  if (!m.is_object()) return kNull;
  auto it = m.find(key);
  return it == m.end() ? kNull : *it;
}

// The signal a peer's "stopped" message `m` names (it goes to the document's
// "stopped_by"): its "signal" when a string, as PeerText of at most 32 bytes, else
// "a stop signal".
inline std::string PeerSignal(const nlohmann::json& m) {
  return PeerText(m, "signal", 32, "a stop signal");
}

}  // namespace kvbench
