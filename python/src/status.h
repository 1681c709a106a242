// Status in Python: kvlane.Code (the engine's Code enum) and kvlane.Error (the
// exception every engine error becomes; both defined by BindStatus). Every
// function here needs the GIL and BindStatus to have run.
#pragma once

#include <string_view>
#include <utility>

#include "kvlane/status.h"
#include "pybind.h"

namespace kvlane::python {

// `text` as a str, bytes that are not UTF-8 replaced by U+FFFD: for text that
// may quote a peer (the engine keeps names and quoted reasons plain; this is
// the second line), so that turning it into a str cannot itself fail.
py::str LossyStr(std::string_view text);

// A kvlane.Error for `s` (not raised): .code, .message, str() "code-name: message".
// REQUIRES: s.is_error().
py::object MakeError(const Status& s);

// Raises `s` as kvlane.Error. REQUIRES: s.is_error().
[[noreturn]] void Raise(const Status& s);

// kvlane.Code.OK or IN_PROGRESS for a non-error Status; raises an error.
// Cheap: the two objects are made once, at import.
py::object CodeOrRaise(const Status& s);

inline void RaiseIfError(const Status& s) {
  if (s.is_error()) Raise(s);
}

template <typename T>
T ValueOrRaise(Result<T> r) {
  if (!r.ok()) Raise(r.status());
  return std::move(r).value();
}

}  // namespace kvlane::python
