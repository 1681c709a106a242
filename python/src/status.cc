#include "status.h"

#include "bindings.h"

namespace kvlane::python {
namespace {

// Owned for the life of the process: never released, so nothing touches them
// after the interpreter has gone.
PyObject* error_type = nullptr;
PyObject* code_ok = nullptr;
PyObject* code_in_progress = nullptr;

constexpr const char* kErrorDoc =
    "An engine call failed.\n\n"
    "Attributes:\n"
    "    code (kvlane.Code): what went wrong; never OK or IN_PROGRESS.\n"
    "    message (str): the engine's explanation.\n\n"
    "str(error) is \"code-name: message\", e.g. \"not-allowed: ...\".";

}  // namespace

void BindStatus(py::module_& m) {
  py::enum_<Code>(m, "Code", "Outcome of an engine call: IN_PROGRESS > 0, OK == 0, errors < 0.")
      .value("IN_PROGRESS", Code::kInProgress)
      .value("OK", Code::kOk)
      .value("INVALID_ARGUMENT", Code::kInvalidArgument)
      .value("NOT_FOUND", Code::kNotFound)
      .value("NOT_ALLOWED", Code::kNotAllowed)
      .value("BACKEND", Code::kBackend)
      .value("REMOTE_DISCONNECT", Code::kRemoteDisconnect)
      .value("REMOTE_STALE", Code::kRemoteStale)
      .value("CANCELED", Code::kCanceled)
      .value("TIMEOUT", Code::kTimeout)
      .value("NOT_SUPPORTED", Code::kNotSupported);
  code_ok = py::cast(Code::kOk).release().ptr();
  code_in_progress = py::cast(Code::kInProgress).release().ptr();
  error_type = PyErr_NewExceptionWithDoc("kvlane.Error", kErrorDoc, PyExc_RuntimeError, nullptr);
  if (error_type == nullptr) throw py::error_already_set();
  m.attr("Error") = py::handle(error_type);
}

py::str LossyStr(std::string_view text) {
  PyObject* str =
      PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()), "replace");
  if (str == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(str);
}

py::object MakeError(const Status& s) {
  py::object e = py::handle(error_type)(LossyStr(s.ToString()));
  e.attr("code") = py::cast(s.code());
  e.attr("message") = LossyStr(s.message());
  return e;
}

void Raise(const Status& s) {
  py::object e = MakeError(s);
  PyErr_SetObject(error_type, e.ptr());
  throw py::error_already_set();
}

py::object CodeOrRaise(const Status& s) {
  if (s.is_error()) Raise(s);
  return py::reinterpret_borrow<py::object>(s.ok() ? code_ok : code_in_progress);
}

}  // namespace kvlane::python
