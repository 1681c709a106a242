// The `kvlane` Python module: a thin layer over include/kvlane/ for Python KV
// connectors. Errors raise kvlane.Error; blocking calls release the GIL.
#include <chrono>
#include <cmath>

#include "bindings.h"
#include "fork_guard.h"
#include "gil.h"
#include "kvlane/agent.h"
#include "kvlane/version.h"
#include "pybind.h"
#include "status.h"

namespace kvlane::python {

void BindFunctions(py::module_& m) {
  m.def("version", &VersionString,
        "\"kvlane 0.1.0 (git abcdef)\": the engine this module was built from.");
  m.def(
      "fetch_metadata",
      [](const std::string& host_port, double timeout_s) {
        if (!std::isfinite(timeout_s) || timeout_s < 1e-3 || timeout_s > 86400)
          throw py::value_error("timeout_s must be a number of seconds, 0.001..86400 (24 h)");
        const auto timeout =
            std::chrono::round<std::chrono::milliseconds>(std::chrono::duration<double>(timeout_s));
        Result<std::string> blob = WithoutGil([&] { return FetchMetadata(host_port, timeout); });
        return py::bytes(ValueOrRaise(std::move(blob)));
      },
      py::arg("host_port"), py::arg("timeout_s") = 5.0,
      "Fetches a peer's metadata (bytes) from its metadata listener (\"host:port\"; see "
      "Agent(metadata_listen=...)).");
  m.def(
      "ensure_memlock", [](uint64_t bytes) { RaiseIfError(EnsureMemlock(bytes)); },
      py::arg("bytes"),
      "Raises RLIMIT_MEMLOCK's soft limit so that `bytes` can be pinned; kvlane.Error if the hard "
      "limit is too low.");
}

}  // namespace kvlane::python

PYBIND11_MODULE(kvlane, m) {
  namespace kp = kvlane::python;
  m.doc() = R"(kvlane: moves LLM KV-cache between GPUs and hosts (Python binding of the C++ engine).

    a = kvlane.Agent("prefill-0", transports=["shm", "tcp"])
    region = a.register_memory(kv_pool)           # a bytearray / numpy array, pinned
    blob = a.export_metadata()                    # send to the peer, any way you like
    peer = b.load_peer(blob)
    t = b.make_transfer("read", b.prepare_local([(dst_addr, n)]),
                        b.prepare_remote(peer, [(region.addr, n)]))
    t.post(); t.wait()

Errors raise kvlane.Error (with .code, a kvlane.Code); blocking calls release the GIL.)";
  m.attr("__version__") = KVLANE_VERSION_STRING;
  kp::InitGil();
  kp::InitForkGuard();
  kp::BindStatus(m);
  kp::BindValues(m);
  kp::BindTransfer(m);
  kp::BindAgent(m);
  kp::BindFunctions(m);
}
