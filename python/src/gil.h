// WithoutGil: runs engine code with the GIL released, safe for daemon threads
// at interpreter exit.
//
// py::gil_scoped_release takes the GIL back in a destructor. When the
// interpreter is finalizing, CPython ends a (daemon) thread that asks for the
// GIL with pthread_exit, whose unwinding may not pass a destructor (noexcept):
// the process aborted ("terminate called without an active exception") when a
// script ended while a daemon thread was inside wait(). Here the GIL is taken
// back in plain code, and a thread other than the finalizing one that finds
// the interpreter finalizing parks instead of asking: the process is about to
// exit, and Python code must not run on it again anyway. (The finalizing
// thread takes the GIL back as usual: it destroys agents then.) A destructor
// that releases the GIL (a dropped transfer, a collected agent) takes it back
// inside the destructor: a daemon thread that passes the check just before
// finalizing begins may still end there (a window of a few instructions).
#pragma once

#include <optional>
#include <type_traits>
#include <utility>

#include "pybind.h"

namespace kvlane::python {

// Remembers the thread that will finalize the interpreter (the main thread,
// or the one that runs the atexit callbacks). REQUIRES: the GIL; called once,
// at import.
void InitGil();

// Takes the GIL back for `state` (from PyEval_SaveThread), or, on a thread
// other than the finalizing one once the interpreter is finalizing, never returns.
void ReacquireGil(PyThreadState* state);

// Runs fn() with the GIL released and returns its result. REQUIRES: the GIL.
// `fn` must not touch Python objects.
template <typename F>
auto WithoutGil(F&& fn) {
  using R = std::invoke_result_t<F&>;
  PyThreadState* state = PyEval_SaveThread();
  if constexpr (std::is_void_v<R>) {
    try {
      fn();
    } catch (...) {
      ReacquireGil(state);
      throw;
    }
    ReacquireGil(state);
  } else {
    std::optional<R> result;
    try {
      result.emplace(fn());
    } catch (...) {
      ReacquireGil(state);
      throw;
    }
    ReacquireGil(state);
    return std::move(*result);
  }
}

}  // namespace kvlane::python
