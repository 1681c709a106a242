#include "burst.h"

#include <algorithm>
#include <thread>

namespace kvbench {
namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

}  // namespace

kvlane::Result<Burst> Burst::Make(kvlane::Agent* agent, kvlane::Op op, kvlane::PreparedId local,
                                  kvlane::PreparedId remote, const BurstMap& map) {
  Burst b(agent);
  for (size_t r = 0; r < map.initiator.size(); ++r) {
    KVLANE_ASSIGN_OR_RETURN(kvlane::XferHandle h, agent->MakeTransfer(op, local, map.initiator[r],
                                                                      remote, map.target[r]));
    b.handles_.push_back(h);
    KVLANE_ASSIGN_OR_RETURN(kvlane::XferInfo info, agent->Describe(h));
    b.segments_ += info.segments;
  }
  return b;
}

Burst::~Burst() { Release(); }

void Burst::Release() {
  if (agent_ == nullptr) return;
  for (kvlane::XferHandle& h : handles_) {
    if (agent_->Release(&h).is_error()) {
      (void)agent_->Wait(h, std::chrono::seconds(10));  // a lane still owns it: drain, retry
      (void)agent_->Release(&h);
    }
  }
  handles_.clear();
  agent_ = nullptr;
}

BurstTiming Burst::Run(std::chrono::milliseconds timeout, const StopCheck& stop) {
  BurstTiming t;
  t.request_ms.assign(handles_.size(), -1);
  std::vector<bool> done(handles_.size(), false);
  size_t pending = handles_.size();
  Clock::time_point t0 = Clock::now();
  Clock::time_point next_ask = t0 + kStopEvery;
  for (size_t i = 0; i < handles_.size(); ++i) {
    kvlane::Status s = agent_->Post(&handles_[i]);
    if (s.is_error()) {
      if (t.status.ok()) t.status = s;
      done[i] = true;
      --pending;
    }
  }
  while (pending > 0) {
    for (size_t i = 0; i < handles_.size(); ++i) {
      if (done[i]) continue;
      kvlane::Status s = agent_->Check(handles_[i]);
      if (s.in_progress()) continue;
      t.request_ms[i] = MsSince(t0);
      if (s.is_error() && t.status.ok()) t.status = s;
      done[i] = true;
      --pending;
    }
    if (pending == 0) break;
    if (MsSince(t0) > static_cast<double>(timeout.count())) {
      t.status = kvlane::Status::Timeout("burst did not finish within " +
                                         std::to_string(timeout.count()) + " ms");
      break;
    }
    if (stop && Clock::now() >= next_ask) {
      next_ask = Clock::now() + kStopEvery;
      if (stop()) {
        kvlane::Status s = Abandon(done, t0 + timeout);
        t.status = s.ok() ? kvlane::Status::Canceled("burst abandoned: the run is stopping") : s;
        t.abandoned = true;
        break;
      }
    }
    std::this_thread::yield();  // share the cores with the engine's lane workers
  }
  t.total_ms = MsSince(t0);
  return t;
}

kvlane::Status Burst::Abandon(const std::vector<bool>& done, Clock::time_point deadline) {
  for (size_t i = 0; i < handles_.size(); ++i) {
    if (!done[i]) (void)agent_->Cancel(handles_[i]);  // kNotAllowed: a lane has it; waited below
  }
  kvlane::Status first;
  for (size_t i = 0; i < handles_.size(); ++i) {
    if (done[i]) continue;
    const auto left = std::max(deadline - Clock::now(), Clock::duration::zero());
    kvlane::Status s = agent_->Wait(handles_[i], left);
    if (s.is_error() && s.code() != kvlane::Code::kCanceled && first.ok()) first = s;
  }
  return first;
}

}  // namespace kvbench
