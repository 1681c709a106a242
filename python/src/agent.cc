#include "agent.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "fork_guard.h"
#include "scoped_flag.h"
#include "status.h"

namespace kvlane::python {
namespace {

std::atomic<uint64_t> next_serial{1};

}  // namespace

PyAgent::PyAgent(std::unique_ptr<Agent> agent)
    : serial_(next_serial.fetch_add(1, std::memory_order_relaxed)),
      pid_(getpid()),
      fork_generation_(ForkGeneration()),
      agent_(std::move(agent)) {}

PyAgent::~PyAgent() { (void)Destroy(); }  // memory to keep stays pinned all the same

Agent& PyAgent::agent() {
  if (agent_ == nullptr) throw py::value_error("the kvlane.Agent is closed");
  if (stopping_) throw py::value_error("the kvlane.Agent is closing");
  if (ForkGeneration() != fork_generation_)
    throw std::runtime_error("this kvlane.Agent was created in process " + std::to_string(pid_) +
                             ", before a fork(): an agent does not survive fork(); create one "
                             "in this process (multiprocessing: use the 'spawn' start method, "
                             "or create agents in the children)");
  return *agent_;
}

void PyAgent::Close() {
  // Another thread's close is in its engine close (GIL released) or waiting
  // for calls to end: the pins must stay until it is done.
  if (closing_ || stopping_)
    throw std::runtime_error("kvlane.Agent.close(): another thread is closing this agent");
  // (A forked child may have inherited calls in flight on threads it does not
  // have: they never end there.)
  if (busy_ > 0 && agent_ != nullptr && ForkGeneration() == fork_generation_) {
    const ScopedFlag stopping(&stopping_);
    const AgentOptions& o = agent_->options();
    const auto deadline = std::chrono::steady_clock::now() +
                          std::max<std::chrono::nanoseconds>(o.post_timeout, 2 * o.io_timeout) +
                          std::chrono::seconds(1);
    while (busy_ > 0 && std::chrono::steady_clock::now() < deadline) {
      {
        py::gil_scoped_release unlocked;  // their calls need the GIL back to return
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      if (PyErr_CheckSignals() != 0) throw py::error_already_set();  // Ctrl-C: the agent stays open
    }
    if (busy_ > 0)
      throw std::runtime_error(
          "kvlane.Agent.close(): another thread is still inside a call of this agent");
  }
  RaiseIfError(Destroy());
}

Status PyAgent::Destroy() {
  Status closed;
  if (agent_ != nullptr && ForkGeneration() != fork_generation_) {
    // A forked child's copy: its threads, sockets' peers and lanes are the
    // parent's. Destroying it would join threads that do not exist here.
    (void)agent_.release();
  } else if (agent_ != nullptr) {
    std::unique_ptr<Agent> agent = std::move(agent_);
    // Until the engine is gone another thread's close() must not let go of the
    // pins below: the engine, or an shm target, may still copy into them.
    const ScopedFlag closing(&closing_);
    closed = WithoutGil([&] {  // joins the engine's threads
      Status s = agent->Close();
      agent.reset();
      return s;
    });
  }
  orphans_.clear();  // their slots went with the engine agent
  for (auto& [id, pin] : pins_) {
    // Kept for good, on purpose: something may still copy into or out of them.
    if (closed.code() == Code::kBackend || poisoned_.count(id) != 0) (void)pin.release();
  }
  poisoned_.clear();
  pins_.clear();  // only now: the engine and its peers' accesses are done with them
  return closed;
}

void PyAgent::ReleaseOrphans() {
  if (orphans_.empty()) return;
  // Taken out with the GIL held: a transfer dropped meanwhile adds to the
  // member, and a second thread reaping at once finds none of these.
  std::vector<XferHandle> mine = std::move(orphans_);
  orphans_.clear();
  // (Raises, dropping them, once closed or in a forked child: their slots went
  // with the engine agent, or are the parent's.)
  const std::vector<XferHandle> still = Blocking([&](Agent& a) {
    std::vector<XferHandle> held;
    for (XferHandle h : mine) {
      // Still in flight: kept without a Release, which could wait for it (up
      // to io_timeout per orphan, a wedged lane) while the caller is stuck.
      if (a.Check(h).in_progress()) {
        held.push_back(h);
        continue;
      }
      // kNotAllowed: a lane still owns it; kTimeout: a lane still holds a
      // post the GPU published. Ok frees the slot; kNotFound: it is gone.
      const Code c = a.Release(&h).code();
      if (c == Code::kNotAllowed || c == Code::kTimeout) held.push_back(h);
    }
    return held;
  });
  orphans_.insert(orphans_.end(), still.begin(), still.end());
}

void PyAgent::CheckOwner(uint64_t owner, const char* what) const {
  if (owner != serial_)
    throw py::value_error(std::string(what) + " belongs to another kvlane.Agent");
}

}  // namespace kvlane::python
