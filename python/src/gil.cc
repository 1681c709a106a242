#include "gil.h"

#include <unistd.h>

namespace kvlane::python {
namespace {

bool Finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing() != 0;
#else
  return _Py_IsFinalizing() != 0;
#endif
}

unsigned long main_thread = 0;  // PyThread_get_thread_ident() of the main thread

}  // namespace

void InitGil() {
  main_thread =
      py::module_::import("threading").attr("main_thread")().attr("ident").cast<unsigned long>();
}

void ReacquireGil(PyThreadState* state) {
  // Finalizing: CPython would end this thread inside PyEval_RestoreThread.
  // (Should finalizing begin just after this check, that exit unwinds through
  // plain frames: WithoutGil takes the GIL back outside any destructor.)
  if (Finalizing() && PyThread_get_thread_ident() != main_thread) {
    for (;;) pause();
  }
  PyEval_RestoreThread(state);
}

}  // namespace kvlane::python
