// register_memory / deregister_memory: a Python buffer stays exported (pinned)
// for as long as its region is registered; a raw address is the caller's to
// keep alive.
#include "agent.h"
#include "status.h"

namespace kvlane::python {
namespace {

bool WritableBuffer(py::handle obj) {
  if (!PyObject_CheckBuffer(obj.ptr())) return false;
  Py_buffer view;
  if (PyObject_GetBuffer(obj.ptr(), &view, PyBUF_WRITABLE) != 0) {
    PyErr_Clear();
    return false;
  }
  PyBuffer_Release(&view);
  return true;
}

// Whether `obj` is a numpy array (a read-only 0-d integer array has __index__
// too, but is memory, not an address). numpy not imported: it is none.
bool NumpyArray(py::handle obj) {
  PyObject* numpy = PyImport_GetModule(py::str("numpy").ptr());  // new reference, or null
  if (numpy == nullptr) {
    PyErr_Clear();
    return false;
  }
  py::object np = py::reinterpret_steal<py::object>(numpy);
  if (!py::hasattr(np, "ndarray")) return false;
  return py::isinstance(obj, np.attr("ndarray"));
}

// `obj` as an address: an int (not a bool), or an integer-like object that is
// not a writable buffer and whose __index__ answers (a numpy integer scalar,
// which exports a read-only buffer of its own bytes). nullopt: not an address.
std::optional<py::int_> AsAddress(py::handle obj) {
  if (PyBool_Check(obj.ptr())) return std::nullopt;
  if (PyLong_Check(obj.ptr())) return py::reinterpret_borrow<py::int_>(obj);
  if (!PyIndex_Check(obj.ptr()) || WritableBuffer(obj) || NumpyArray(obj)) return std::nullopt;
  PyObject* index = PyNumber_Index(obj.ptr());
  if (index == nullptr) {
    PyErr_Clear();
    return std::nullopt;
  }
  return py::reinterpret_steal<py::int_>(index);
}

}  // namespace

BufferPin::BufferPin(py::handle obj) {
  if (PyObject_GetBuffer(obj.ptr(), &view_, PyBUF_WRITABLE | PyBUF_ANY_CONTIGUOUS) == 0) return;
  // The exporter's reason ("Object is not writable.", "ndarray is not
  // C-contiguous"), and why kvlane asks: read_only=True restricts peers, and
  // this agent's own READs still store into the region.
  py::error_already_set e;
  throw py::buffer_error(
      std::string("register_memory needs a writable, contiguous buffer (read_only=True limits "
                  "what peers may do; this agent's own READs may still store into it): ") +
      e.what());
}

PyRegion PyAgent::Register(py::handle target, std::optional<uint64_t> length, MemoryKind kind,
                           int32_t device, bool read_only) {
  std::unique_ptr<BufferPin> pin;
  uint64_t addr = 0;
  if (std::optional<py::int_> as_int = AsAddress(target)) {
    addr = PyLong_AsUnsignedLongLong(as_int->ptr());
    if (PyErr_Occurred()) {
      PyErr_Clear();
      throw py::value_error("an address is a non-negative int below 2**64");
    }
    if (!length) throw py::type_error("register_memory(addr, length): an address needs a length");
  } else {
    if (kind != MemoryKind::kHost)
      throw py::value_error("a buffer object is host memory; pass device memory as an int address");
    pin = std::make_unique<BufferPin>(target);
    addr = reinterpret_cast<uint64_t>(pin->data());
    if (length && *length > pin->size())
      throw py::value_error("length " + std::to_string(*length) + " exceeds the buffer's " +
                            std::to_string(pin->size()) + " bytes");
    if (!length) length = pin->size();
  }
  const Access access = read_only ? Access::kReadOnly : Access::kReadWrite;
  Result<RegionId> id = Blocking([&](Agent& a) {
    return a.RegisterMemory(reinterpret_cast<void*>(addr), *length, kind, device, access);
  });
  if (!id.ok()) Raise(id.status());
  if (pin) pins_[id.value().value] = std::move(pin);
  return PyRegion{serial_, id.value(), addr, *length, kind, device, read_only};
}

void PyAgent::Deregister(const PyRegion& region) {
  CheckOwner(region.owner, "this region");
  // Waits for remote accesses in flight, and for this agent's own transfers in
  // flight on the region; only then may the buffer go (kept on an error).
  const Status s = Blocking([&](Agent& a) { return a.DeregisterMemory(region.id); });
  // kBackend: something may still copy into or out of it (a wedged GPU, an shm
  // target that did not let go): its pin outlives the agent (Destroy).
  if (s.code() == Code::kBackend) poisoned_.insert(region.id.value);
  RaiseIfError(s);
  pins_.erase(region.id.value);
}

}  // namespace kvlane::python
