// Reading one field of a peer's control message, which is untrusted input: a
// field that is missing or of another type reads as absent, never throws.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <type_traits>

namespace kvbench {

// m[key] when m is an object holding it with T's JSON type (bool, an integer,
// a string), else nullopt.
template <typename T>
std::optional<T> TypedField(const nlohmann::json& m, const char* key) {
  static_assert(
      std::is_same_v<T, bool> || std::is_same_v<T, int64_t> || std::is_same_v<T, std::string>,
      "bool, int64_t or std::string");
  if (!m.is_object()) return std::nullopt;
  auto it = m.find(key);
  if (it == m.end()) return std::nullopt;
  bool fits = false;
  if constexpr (std::is_same_v<T, bool>) fits = it->is_boolean();
  if constexpr (std::is_same_v<T, int64_t>) fits = it->is_number_integer();
  if constexpr (std::is_same_v<T, std::string>) fits = it->is_string();
  if (!fits) return std::nullopt;
  return it->get<T>();
}

}  // namespace kvbench
