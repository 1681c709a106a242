// kvlane.Region and kvlane.Prepared: the values kvlane.Agent hands out.
#include "agent.h"
#include "bindings.h"

namespace kvlane::python {

void BindValues(py::module_& m) {
  py::class_<PyRegion>(m, "Region", "A registered memory region (Agent.register_memory).")
      .def_property_readonly("id", [](const PyRegion& r) { return r.id.value; })
      .def_readonly("addr", &PyRegion::addr, "First byte's address (for descriptors).")
      .def_readonly("length", &PyRegion::length, "Bytes registered.")
      .def_property_readonly("kind", [](const PyRegion& r) { return MemoryKindName(r.kind); })
      .def_readonly("device", &PyRegion::device)
      .def_readonly("read_only", &PyRegion::read_only, "Peers may READ it but not WRITE it.")
      .def("__repr__", [](const PyRegion& r) {
        return "<kvlane.Region " + std::to_string(r.id.value) + " " + MemoryKindName(r.kind) +
               " addr=0x" + py::cast<std::string>(py::str("{:x}").format(r.addr)) +
               " length=" + std::to_string(r.length) + (r.read_only ? " read-only>" : ">");
      });
  py::class_<PyPrepared>(m, "Prepared",
                         "A prepared descriptor list (Agent.prepare_local / prepare_remote).")
      .def_property_readonly("id", [](const PyPrepared& p) { return p.id.value; })
      .def_property_readonly(
          "peer",
          [](const PyPrepared& p) -> std::optional<std::string> {
            if (p.peer.empty()) return std::nullopt;
            return p.peer;
          },
          "The peer of a remote list; None for a local one.")
      .def_property_readonly("kind", [](const PyPrepared& p) { return MemoryKindName(p.kind); })
      .def("__len__", [](const PyPrepared& p) { return p.count; })
      .def("__repr__", [](const PyPrepared& p) {
        return "<kvlane.Prepared " + std::to_string(p.id.value) + " " +
               (p.peer.empty() ? "local" : "remote '" + p.peer + "'") + ", " +
               std::to_string(p.count) + " descriptors>";
      });
}

}  // namespace kvlane::python
