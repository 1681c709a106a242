// PyAgent: the object behind kvlane.Agent. Owns the engine Agent and pins the
// Python buffers registered with it. PyRegion and PyPrepared are the values
// its calls hand out (kvlane.Region, kvlane.Prepared).
//
// Thread-safety: used with the GIL held, which guards its own state. Calls that
// may block release the GIL around the engine call only (Blocking); Close()
// refuses while one is in flight, so the engine agent is never destroyed under
// a call.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "gil.h"
#include "kvlane/agent.h"
#include "pybind.h"

namespace kvlane::python {

// A registered region, as register_memory returns it.
struct PyRegion {
  uint64_t owner = 0;  // PyAgent::serial() of the agent that registered it
  RegionId id;
  uint64_t addr = 0;
  uint64_t length = 0;
  MemoryKind kind = MemoryKind::kHost;
  int32_t device = 0;
  bool read_only = false;
};

// A prepared descriptor list, as prepare_local / prepare_remote return it.
struct PyPrepared {
  uint64_t owner = 0;  // PyAgent::serial()
  PreparedId id;
  size_t count = 0;  // descriptors
  std::string peer;  // empty for a local list
  MemoryKind kind = MemoryKind::kHost;
};

// Holds a buffer export of a Python object. While it is held the exporter may
// not resize or free that memory (bytearray and numpy refuse to resize).
// REQUIRES: the GIL, to create and to destroy.
class BufferPin {
 public:
  // Raises BufferError (from the exporter) unless `obj` is writable and contiguous.
  explicit BufferPin(py::handle obj);
  ~BufferPin() { PyBuffer_Release(&view_); }
  BufferPin(const BufferPin&) = delete;
  BufferPin& operator=(const BufferPin&) = delete;
  void* data() const { return view_.buf; }
  uint64_t size() const { return static_cast<uint64_t>(view_.len); }

 private:
  Py_buffer view_{};
};

class PyAgent {
 public:
  explicit PyAgent(std::unique_ptr<Agent> agent);
  ~PyAgent();  // Close(), whatever is in flight (nothing can be: calls hold a reference)
  PyAgent(const PyAgent&) = delete;
  PyAgent& operator=(const PyAgent&) = delete;

  // Process-unique: tells this agent's regions and lists from another's.
  uint64_t serial() const { return serial_; }
  bool closed() const { return agent_ == nullptr; }
  // The engine agent. ValueError once closed; RuntimeError in a child forked
  // after the agent was created (the engine's threads did not come along).
  Agent& agent();
  // Runs fn(Agent&) with the GIL released and returns its result. ValueError
  // once closed. `fn` must not touch Python objects.
  template <typename F>
  auto Blocking(F&& fn);
  // Whether a thread is inside a Blocking call of this agent (GIL held).
  bool others_blocking() const { return busy_ > 0; }
  // Whether a close() waits for other threads' calls to end: wait() stops at
  // its next slice (kvlane.Error CANCELED), and new calls raise ValueError.
  bool stopping() const { return stopping_; }
  // Closes and destroys the engine agent (GIL released), then lets go of every
  // pinned buffer, or, when Agent::Close said memory may still be copied
  // (kBackend), of none: then raises that kvlane.Error, the agent closed.
  // Calls other threads are inside end first (stopping()): waits for them, GIL
  // released, up to max(post_timeout, 2 x io_timeout) + 1 s; RuntimeError if
  // one is still inside then, or while another thread is closing it (its
  // engine close runs with the GIL released: the pins must stay until it
  // returns). Idempotent. In a forked child the engine agent is let go of, not
  // destroyed (its threads live in the parent only).
  void Close();
  // ValueError unless `owner` is this agent's serial.
  void CheckOwner(uint64_t owner, const char* what) const;

  // A dropped transfer whose request a lane still owns: released later (by
  // ReleaseOrphans, or with the agent) instead of waiting in the destructor,
  // which would block the dropping thread (GC, Ctrl-C ignored) for as long as
  // a stalled peer takes to time out.
  void Orphan(const XferHandle& handle) { orphans_.push_back(handle); }
  // Releases the orphans whose lanes let go (GIL released); keeps the others.
  // Called before a transfer is made, where their slots are wanted. Threads
  // that call it at once each take their own share of the list.
  void ReleaseOrphans();

  // register_memory and deregister_memory (agent_memory.cc).
  PyRegion Register(py::handle target, std::optional<uint64_t> length, MemoryKind kind,
                    int32_t device, bool read_only);
  void Deregister(const PyRegion& region);

 private:
  // Close() without the busy check; returns Agent::Close's answer.
  Status Destroy();

  const uint64_t serial_;
  const pid_t pid_;                 // the process that created the engine agent
  const uint64_t fork_generation_;  // ForkGeneration() there
  // By RegionId. Declared before agent_ so that it is destroyed after it; Close()
  // orders the two explicitly as well.
  std::map<uint64_t, std::unique_ptr<BufferPin>> pins_;
  // Regions DeregisterMemory said must stay (kBackend): Destroy never lets go
  // of their pins, so the Python buffers live as long as the process.
  std::set<uint64_t> poisoned_;
  std::unique_ptr<Agent> agent_;
  int busy_ = 0;                     // Blocking calls in flight (GIL-guarded)
  bool closing_ = false;             // Destroy's engine close in flight (GIL-guarded)
  bool stopping_ = false;            // Close waits for other calls to end (GIL-guarded)
  std::vector<XferHandle> orphans_;  // GIL-guarded
};

template <typename F>
auto PyAgent::Blocking(F&& fn) {
  Agent& a = agent();
  ++busy_;
  struct Leave {
    int* busy;
    ~Leave() { --*busy; }
  } leave{&busy_};                           // runs with the GIL back
  return WithoutGil([&] { return fn(a); });  // the engine never calls into Python
}

}  // namespace kvlane::python
