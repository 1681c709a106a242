// PyTransfer: the object behind kvlane.Transfer, one transfer handle of one
// agent. It holds a reference to its kvlane.Agent, so the agent lives at least
// as long as the transfer; once the agent is closed, every call but release()
// raises ValueError.
//
// Thread-safety: a transfer is used by one thread at a time. A call made while
// another thread is inside its post(), wait() or release() raises RuntimeError,
// except check(), which stays a single load (IN_PROGRESS while another thread
// is inside post(): the handle's new generation is not known yet).
#pragma once

#include <optional>

#include "agent.h"
#include "pybind.h"

namespace kvlane::python {

class PyTransfer {
 public:
  // `owner` is the kvlane.Agent object whose PyAgent made `handle`.
  // `notifies`: the transfer carries a notification (sent by whichever thread
  // finishes a post: perhaps the posting one, a round trip to the peer).
  PyTransfer(py::object owner, XferHandle handle, Op op, uint32_t chunks, bool notifies);
  // Releases the handle if the agent is still open; one whose request a lane
  // still owns goes to the agent (PyAgent::Orphan), released later.
  ~PyTransfer();
  PyTransfer(const PyTransfer&) = delete;
  PyTransfer& operator=(const PyTransfer&) = delete;

  py::object Post();                                 // Code.IN_PROGRESS or OK
  py::object Check();                                // Code.IN_PROGRESS or OK
  py::object Wait(std::optional<double> timeout_s);  // OK, or IN_PROGRESS on timeout
  void Cancel();
  void Release();
  XferInfo Describe();
  Op op() const { return op_; }
  bool released() const { return !handle_.valid(); }

 private:
  // The open agent of a live handle; raises ValueError otherwise, RuntimeError
  // while another thread is inside one of this transfer's blocking calls.
  PyAgent& Use();
  // Runs fn(Agent&, XferHandle&) on a copy of the handle with the GIL released,
  // then stores the copy back.
  template <typename F>
  auto Blocking(F&& fn);

  py::object owner_;  // the kvlane.Agent: keeps agent_ alive
  PyAgent* agent_;
  XferHandle handle_;
  Op op_;
  uint32_t chunks_;    // a post of more than kUnlockedPostChunks releases the GIL
  bool notifies_;      // and so does one of a transfer with a notification
  bool busy_ = false;  // inside Blocking (GIL-guarded)
  bool posting_ = false;  // inside a post that released the GIL (GIL-guarded)
};

}  // namespace kvlane::python
