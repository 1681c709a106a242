// Status and Result: the only way errors leave kvlane's public API.
// Thread-safety: values; copy freely. No exception crosses the API.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

namespace kvlane {

// One enum for every outcome. kInProgress is positive, kOk zero, errors negative.
enum class Code : int32_t {
  kInProgress = 1,
  kOk = 0,
  kInvalidArgument = -1,
  kNotFound = -2,
  kNotAllowed = -3,
  kBackend = -4,
  kRemoteDisconnect = -5,
  kRemoteStale = -6,  // the peer's region was deregistered (or never existed)
  kCanceled = -7,
  kTimeout = -8,
  kNotSupported = -9,
};

// Stable lowercase name of a code ("ok", "remote-disconnect", ...).
const char* CodeName(Code code);

// Returns true when `raw` is one of the values of Code.
bool IsKnownCode(int32_t raw);

class [[nodiscard]] Status {
 public:
  Status() = default;  // ok
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  static Status InProgress() { return Status(Code::kInProgress, ""); }
  static Status InvalidArgument(std::string m) { return {Code::kInvalidArgument, std::move(m)}; }
  static Status NotFound(std::string m) { return {Code::kNotFound, std::move(m)}; }
  static Status NotAllowed(std::string m) { return {Code::kNotAllowed, std::move(m)}; }
  static Status Backend(std::string m) { return {Code::kBackend, std::move(m)}; }
  static Status RemoteDisconnect(std::string m) { return {Code::kRemoteDisconnect, std::move(m)}; }
  static Status RemoteStale(std::string m) { return {Code::kRemoteStale, std::move(m)}; }
  static Status Canceled(std::string m) { return {Code::kCanceled, std::move(m)}; }
  static Status Timeout(std::string m) { return {Code::kTimeout, std::move(m)}; }
  static Status NotSupported(std::string m) { return {Code::kNotSupported, std::move(m)}; }

  bool ok() const { return code_ == Code::kOk; }
  bool in_progress() const { return code_ == Code::kInProgress; }
  bool is_error() const { return static_cast<int32_t>(code_) < 0; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  std::string ToString() const;

 private:
  Code code_ = Code::kOk;
  std::string message_;
};

// A value or an error Status. REQUIRES: value() only when ok().
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status)                          // NOLINT
      : status_(status.ok() ? Status::Backend("Result built from an ok Status without a value")
                            : std::move(status)) {}
  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() & { return *value_; }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace kvlane

// Propagates an error Status (kInProgress is not an error).
#define KVLANE_RETURN_IF_ERROR(expr)               \
  do {                                             \
    ::kvlane::Status kvlane_s_ = (expr);           \
    if (kvlane_s_.is_error()) return kvlane_s_;    \
  } while (0)

#define KVLANE_CONCAT_INNER(a, b) a##b
#define KVLANE_CONCAT(a, b) KVLANE_CONCAT_INNER(a, b)
#define KVLANE_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.status();                \
  lhs = std::move(tmp).value()
// Assigns the value of a Result<T> expression to `lhs` or returns its error.
#define KVLANE_ASSIGN_OR_RETURN(lhs, expr) \
  KVLANE_ASSIGN_OR_RETURN_IMPL(KVLANE_CONCAT(kvlane_r_, __LINE__), lhs, expr)
