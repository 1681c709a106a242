// TransferOps: the calls a Burst makes on transfers it has made (kvlane::Agent's
// Post, Check, Wait, Cancel and Release, with the contracts of kvlane/agent.h),
// behind one interface so that a test can stand in for the engine: a request a
// lane holds past any timeout, one that ends late. AgentTransferOps forwards to
// an agent. Thread-safety: as the agent's (one handle used by one thread at a time).
#pragma once

#include <chrono>

#include "kvlane/agent.h"

namespace kvbench {

class TransferOps {
 public:
  virtual ~TransferOps() = default;
  virtual kvlane::Status Post(kvlane::XferHandle* handle) = 0;
  virtual kvlane::Status Check(const kvlane::XferHandle& handle) const = 0;
  virtual kvlane::Status Wait(const kvlane::XferHandle& handle,
                              std::chrono::nanoseconds timeout) const = 0;
  virtual kvlane::Status Cancel(const kvlane::XferHandle& handle) = 0;
  virtual kvlane::Status Release(kvlane::XferHandle* handle) = 0;
};

class AgentTransferOps final : public TransferOps {
 public:
  // REQUIRES: `agent` outlives this object.
  explicit AgentTransferOps(kvlane::Agent* agent) : agent_(agent) {}
  kvlane::Status Post(kvlane::XferHandle* h) override { return agent_->Post(h); }
  kvlane::Status Check(const kvlane::XferHandle& h) const override { return agent_->Check(h); }
  kvlane::Status Wait(const kvlane::XferHandle& h, std::chrono::nanoseconds t) const override {
    return agent_->Wait(h, t);
  }
  kvlane::Status Cancel(const kvlane::XferHandle& h) override { return agent_->Cancel(h); }
  kvlane::Status Release(kvlane::XferHandle* h) override { return agent_->Release(h); }

 private:
  kvlane::Agent* agent_;
};

}  // namespace kvbench
