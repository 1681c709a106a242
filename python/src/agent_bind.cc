// kvlane.Agent: creation, lifetime, memory and peers (agent_transfers_bind.cc
// adds lists, transfers and notifications). Every call that may block releases
// the GIL (PyAgent::Blocking).
#include "agent.h"
#include "bindings.h"
#include "descs.h"
#include "options.h"
#include "status.h"

namespace kvlane::python {
namespace {

std::unique_ptr<PyAgent> Create(const std::string& name, const py::kwargs& kwargs) {
  const AgentOptions o = OptionsFromKwargs(name, kwargs);
  // Starts listeners and threads.
  Result<std::unique_ptr<Agent>> agent = WithoutGil([&] { return Agent::Create(o); });
  return std::make_unique<PyAgent>(ValueOrRaise(std::move(agent)));
}

void DefLifecycle(AgentClass& c) {
  c.def(py::init(&Create), py::arg("name"))
      .def_property_readonly("name", [](PyAgent& a) { return a.agent().name(); })
      .def_property_readonly(
          "options", [](PyAgent& a) { return OptionsToDict(a.agent().options()); },
          "Every option, by keyword name (a new dict).")
      .def_property_readonly(
          "metadata_port", [](PyAgent& a) { return a.agent().metadata_port(); },
          "Port of the metadata listener (metadata_listen=\"host:0\"); 0 when off.")
      .def_property_readonly("closed", &PyAgent::closed)
      .def("close", &PyAgent::Close,
           R"(Stops the agent (its threads joined) and lets go of its pinned buffers.

Transfers made by it become unusable (ValueError). RuntimeError while another thread is
inside one of its calls. Calling it again does nothing. kvlane.Error BACKEND, the agent
closed all the same, when an shm target that did not let go of a failed transfer (or a
wedged GPU) may still copy into or out of its registered memory: then every buffer it
pinned stays pinned for the life of the process.)")
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](PyAgent& a, py::args) { a.Close(); });
}

void DefMemory(AgentClass& c) {
  c.def(
       "register_memory",
       [](PyAgent& a, py::handle target, std::optional<uint64_t> length, const std::string& kind,
          int32_t device, bool read_only) {
         if (device < 0) throw py::value_error("device is a CUDA ordinal (0..2**31-1)");
         return a.Register(target, length, ParseKind(kind), device, read_only);
       },
       py::arg("buffer_or_addr"), py::arg("length") = py::none(), py::arg("kind") = "host",
       py::arg("device") = 0, py::arg("read_only") = false, R"(Registers memory; returns a Region.

buffer_or_addr: a writable, contiguous buffer (bytearray, memoryview, numpy array): it is
    pinned (kept alive, and not resizable) until deregister_memory or close; or an int
    address (e.g. a torch tensor's data_ptr(), or a numpy integer) with `length`: the
    caller keeps that memory alive for as long as it is registered.
length: bytes to register (default: the whole buffer).
kind: "host", or "cuda" for device memory (an address only) on CUDA ordinal `device`.
read_only: peers may READ the region but a WRITE into it fails (kvlane.Error NOT_ALLOWED).)")
      .def("deregister_memory", &PyAgent::Deregister, py::arg("region"),
           "Removes a region once remote accesses in flight finish, then unpins its buffer.\n\n"
           "kvlane.Error BACKEND when something may still copy into or out of it (a wedged "
           "GPU, an shm target that did not let go): the region is gone for new posts and its "
           "buffer stays pinned for the life of the process, even after close().");
}

void DefPeers(AgentClass& c) {
  c.def(
       "export_metadata",
       [](PyAgent& a) {
         // GIL released: it reads the registry under its lock, which a
         // deregistration waiting for a peer's access may hold up.
         return py::bytes(ValueOrRaise(a.Blocking([](Agent& ag) { return ag.ExportMetadata(); })));
       },
       R"(This agent's metadata (bytes): identity, secret, endpoints, regions.

Whoever holds it may access the registered regions: send it only to trusted peers.
Export again after registering memory, and have peers load it again.)")
      .def(
          "load_peer",
          [](PyAgent& a, const std::string& blob) {
            return ValueOrRaise(a.Blocking([&](Agent& ag) { return ag.LoadPeer(blob); }));
          },
          py::arg("metadata"),
          R"(Loads (or refreshes) a peer's metadata (bytes from its export_metadata); returns its name.

A blob with another agent id under a loaded name (the peer restarted) replaces
the entry; lists and transfers made before keep the old one. A refresh waits
for a connect to that peer in progress, and, with a cuda channel open to it,
first asks the peer which of the new table's device pieces are still registered
(one round trip per 8,192 new pieces, all within io_timeout x (2 + one per 8,192),
the two for a revocation in progress): a peer that does not
answer in time fails that channel and this raises kvlane.Error (code TIMEOUT),
the old table kept. Releases the GIL while it waits.)")
      .def(
          "remove_peer",
          [](PyAgent& a, const std::string& peer) {
            RaiseIfError(a.Blocking([&](Agent& ag) { return ag.RemovePeer(peer); }));
          },
          py::arg("peer"), R"(Forgets a peer: prepare_remote, send_notification,
peer_transport and peer_error naming it raise kvlane.Error (code NOT_FOUND) from then on.
Prepared lists and transfers made before keep it (they still post to it; its connections
close once the last of them is released). Loading its metadata again makes a new entry.)")
      .def(
          "peer_transport",
          [](PyAgent& a, const std::string& peer, const std::string& kind) {
            const MemoryKind k = ParseKind(kind);
            return ValueOrRaise(a.Blocking([&](Agent& ag) { return ag.PeerTransport(peer, k); }));
          },
          py::arg("peer"), py::arg("kind") = "host",
          "The transport (\"local\", \"shm\", \"tcp\", \"cuda\") that moves `kind` memory to the "
          "peer; connects if needed.")
      .def(
          "peer_error",
          [](PyAgent& a, const std::string& peer) -> py::object {
            Status s = a.agent().PeerError(peer);
            if (s.code() == Code::kNotFound) Raise(s);
            return s.is_error() ? MakeError(s) : py::none();
          },
          py::arg("peer"),
          "The first fatal error latched on the connection to `peer` (a kvlane.Error, not raised), "
          "or None.");
}

}  // namespace

void BindAgent(py::module_& m) {
  AgentClass c(m, "Agent",
               R"(One endpoint of kvlane: owns registrations, peers, lanes and transfers.

Agent(name, **options): `name` is unique among the agents of a job; the keywords are
AgentOptions' fields (durations in float seconds with a `_s` suffix; see Agent.options for
every name and its default). Unknown keywords raise TypeError, invalid values kvlane.Error.
Use it as a context manager, or call close(), to stop its threads at a known point.
Thread-safe: every call may come from any thread; blocking calls release the GIL. An agent
does not survive fork(): make it in the process that uses it (multiprocessing "spawn").)");
  DefLifecycle(c);
  DefMemory(c);
  DefPeers(c);
  DefTransfers(c);
  c.def("__repr__", [](PyAgent& a) {
    return a.closed() ? std::string("<kvlane.Agent closed>")
                      : "<kvlane.Agent '" + a.agent().name() + "'>";
  });
}

}  // namespace kvlane::python
