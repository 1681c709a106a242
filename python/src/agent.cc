#include "agent.h"

#include <atomic>

namespace kvlane::python {
namespace {

std::atomic<uint64_t> next_serial{1};

}  // namespace

PyAgent::PyAgent(std::unique_ptr<Agent> agent)
    : serial_(next_serial.fetch_add(1, std::memory_order_relaxed)), agent_(std::move(agent)) {}

PyAgent::~PyAgent() { Destroy(); }

Agent& PyAgent::agent() {
  if (agent_ == nullptr) throw py::value_error("the kvlane.Agent is closed");
  return *agent_;
}

void PyAgent::Close() {
  if (busy_ > 0)
    throw std::runtime_error(
        "kvlane.Agent.close(): another thread is inside a call of this agent (a wait?)");
  Destroy();
}

void PyAgent::Destroy() {
  if (agent_ != nullptr) {
    std::unique_ptr<Agent> agent = std::move(agent_);
    py::gil_scoped_release unlocked;  // joins the engine's threads
    agent.reset();
  }
  pins_.clear();  // only now: the engine and its peers' accesses are done with them
}

void PyAgent::CheckOwner(uint64_t owner, const char* what) const {
  if (owner != serial_)
    throw py::value_error(std::string(what) + " belongs to another kvlane.Agent");
}

}  // namespace kvlane::python
