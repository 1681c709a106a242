#include "gil.h"

#include <unistd.h>

#include <atomic>

namespace kvlane::python {
namespace {

bool Finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing() != 0;
#else
  return _Py_IsFinalizing() != 0;
#endif
}

// PyThread_get_thread_ident() of the thread that finalizes: the main thread,
// or whichever thread runs the atexit callbacks (Py_FinalizeEx runs them on
// its own thread before it marks the interpreter finalizing).
std::atomic<unsigned long> finalizing_thread{0};

}  // namespace

void InitGil() {
  finalizing_thread =
      py::module_::import("threading").attr("main_thread")().attr("ident").cast<unsigned long>();
  py::module_::import("atexit").attr("register")(
      py::cpp_function([] { finalizing_thread = PyThread_get_thread_ident(); }));
}

void ReacquireGil(PyThreadState* state) {
  // Finalizing: CPython would end this thread inside PyEval_RestoreThread.
  // (Should finalizing begin just after this check, that exit unwinds through
  // plain frames where WithoutGil was called outside a destructor.)
  if (Finalizing() && PyThread_get_thread_ident() != finalizing_thread) {
    for (;;) pause();
  }
  PyEval_RestoreThread(state);
}

}  // namespace kvlane::python
