#include "descs.h"

#include <cstring>
#include <limits>

namespace kvlane::python {
namespace {

// A buffer view released on scope exit.
class View {
 public:
  explicit View(py::handle obj) {
    if (PyObject_GetBuffer(obj.ptr(), &view_, PyBUF_RECORDS_RO) != 0) throw py::error_already_set();
  }
  ~View() { PyBuffer_Release(&view_); }
  View(const View&) = delete;
  View& operator=(const View&) = delete;
  const Py_buffer& operator*() const { return view_; }

 private:
  Py_buffer view_{};
};

// The element type of an integer buffer: the format's one code (after an
// optional native or little-endian prefix) and whether it is signed.
struct IntFormat {
  size_t size = 0;
  bool is_signed = false;
};

IntFormat ParseIntFormat(const Py_buffer& v) {
  const char* f = v.format != nullptr ? v.format : "B";
  if (*f == '@' || *f == '=' || *f == '<') ++f;
  static constexpr std::string_view kSigned = "bhilqn", kUnsigned = "BHILQN";
  const bool ok = f[0] != '\0' && f[1] == '\0' &&
                  (kSigned.find(f[0]) != kSigned.npos || kUnsigned.find(f[0]) != kUnsigned.npos);
  if (!ok || v.itemsize > 8)
    throw py::type_error(std::string("descriptor arrays hold integers, not format '") +
                         (v.format ? v.format : "") + "'");
  return {static_cast<size_t>(v.itemsize), kSigned.find(f[0]) != kSigned.npos};
}

// Element (row, col) of a 1-D (col 0) or 2-D integer buffer; ValueError if negative.
uint64_t IntAt(const Py_buffer& v, IntFormat fmt, Py_ssize_t row, Py_ssize_t col) {
  const char* p = static_cast<const char*>(v.buf) + row * v.strides[0];
  if (v.ndim == 2) p += col * v.strides[1];
  uint64_t raw = 0;
  std::memcpy(&raw, p, fmt.size);  // little-endian host: the low bytes
  if (fmt.is_signed && ((raw >> (fmt.size * 8 - 1)) & 1) != 0)
    throw py::value_error("negative value at row " + std::to_string(row));
  return raw;
}

// A non-negative Python integer (or anything with __index__, e.g. numpy.int64)
// no greater than `max` (named `max_text` in the error).
uint64_t ToU64(py::handle v, const char* what, size_t i,
               uint64_t max = std::numeric_limits<uint64_t>::max(),
               const char* max_text = "below 2**64") {
  PyObject* n = PyNumber_Index(v.ptr());
  if (n == nullptr) {
    PyErr_Clear();
    throw py::type_error(std::string(what) + " " + std::to_string(i) + ": expected an int");
  }
  unsigned long long x = PyLong_AsUnsignedLongLong(n);
  Py_DECREF(n);
  const bool overflow = x == static_cast<unsigned long long>(-1) && PyErr_Occurred();
  if (overflow) PyErr_Clear();
  if (overflow || x > max)
    throw py::value_error(std::string(what) + " " + std::to_string(i) +
                          ": must be a non-negative int " + max_text);
  return x;
}

// A descriptor's device ordinal: CUDA's are ints.
int32_t DeviceOf(uint64_t x, size_t i) {
  if (x > static_cast<uint64_t>(std::numeric_limits<int32_t>::max()))
    throw py::value_error("descriptor " + std::to_string(i) + ": device " + std::to_string(x) +
                          " is not a device ordinal (0..2**31-1)");
  return static_cast<int32_t>(x);
}

Desc DescFromTuple(py::handle item, size_t i) {
  if (!PyTuple_Check(item.ptr()) && !PyList_Check(item.ptr()))
    throw py::type_error("descriptor " + std::to_string(i) + ": expected (addr, len[, device])");
  py::sequence t = py::reinterpret_borrow<py::sequence>(item);
  if (t.size() != 2 && t.size() != 3)
    throw py::type_error("descriptor " + std::to_string(i) + ": expected (addr, len[, device])");
  Desc d{ToU64(t[0], "descriptor", i), ToU64(t[1], "descriptor", i), 0};
  if (t.size() == 3) d.device = DeviceOf(ToU64(t[2], "descriptor", i), i);
  return d;
}

DescList FromBuffer(py::handle obj, MemoryKind kind) {
  View view(obj);
  const Py_buffer& v = *view;
  IntFormat fmt = ParseIntFormat(v);
  if (v.ndim != 2 || (v.shape[1] != 2 && v.shape[1] != 3))
    throw py::value_error("a descriptor array has shape (n, 2) or (n, 3)");
  DescList list{kind, {}};
  list.descs.resize(static_cast<size_t>(v.shape[0]));
  for (Py_ssize_t i = 0; i < v.shape[0]; ++i) {
    Desc& d = list.descs[static_cast<size_t>(i)];
    d.addr = IntAt(v, fmt, i, 0);
    d.len = IntAt(v, fmt, i, 1);
    if (v.shape[1] == 3) d.device = DeviceOf(IntAt(v, fmt, i, 2), static_cast<size_t>(i));
  }
  return list;
}

}  // namespace

MemoryKind ParseKind(const std::string& kind) {
  if (kind == "host") return MemoryKind::kHost;
  if (kind == "cuda") return MemoryKind::kCuda;
  throw py::value_error("kind must be \"host\" or \"cuda\", not \"" + kind + "\"");
}

Op ParseOp(const std::string& op) {
  if (op == "read") return Op::kRead;
  if (op == "write") return Op::kWrite;
  throw py::value_error("op must be \"read\" or \"write\", not \"" + op + "\"");
}

DescList ToDescList(py::handle descs, MemoryKind kind) {
  if (PyObject_CheckBuffer(descs.ptr())) return FromBuffer(descs, kind);
  if (!PySequence_Check(descs.ptr()) || PyUnicode_Check(descs.ptr()))
    throw py::type_error(
        "descs: expected a list of (addr, len[, device]) or an (n, 2|3) int array");
  DescList list{kind, {}};
  py::sequence seq = py::reinterpret_borrow<py::sequence>(descs);
  list.descs.reserve(seq.size());
  for (size_t i = 0; i < seq.size(); ++i) list.descs.push_back(DescFromTuple(seq[i], i));
  return list;
}

std::vector<uint32_t> ToIndices(py::handle idx) {
  std::vector<uint32_t> out;
  auto add = [&](uint64_t x, size_t i) {
    if (x > std::numeric_limits<uint32_t>::max())
      throw py::value_error("index " + std::to_string(i) + " is above 2**32-1");
    out.push_back(static_cast<uint32_t>(x));
  };
  if (idx.is_none()) return out;
  if (PyObject_CheckBuffer(idx.ptr())) {
    View view(idx);
    const Py_buffer& v = *view;
    IntFormat fmt = ParseIntFormat(v);
    if (v.ndim != 1) throw py::value_error("an index array is one-dimensional");
    for (Py_ssize_t i = 0; i < v.shape[0]; ++i) add(IntAt(v, fmt, i, 0), static_cast<size_t>(i));
    return out;
  }
  if (!PySequence_Check(idx.ptr()) || PyUnicode_Check(idx.ptr()))
    throw py::type_error("indices: expected a sequence of ints or a 1-D int array");
  py::sequence seq = py::reinterpret_borrow<py::sequence>(idx);
  out.reserve(seq.size());
  for (size_t i = 0; i < seq.size(); ++i)
    add(ToU64(seq[i], "index", i, std::numeric_limits<uint32_t>::max(), "at most 2**32-1"), i);
  return out;
}

}  // namespace kvlane::python
