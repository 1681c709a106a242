#include "burst.h"

#include <fmt/format.h>

#include <algorithm>
#include <thread>
#include <utility>

namespace kvbench {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

double MsSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// What ending a burst early did to its pending requests.
struct Drained {
  size_t canceled = 0;         // no lane had started them: canceled, their memory untouched
  size_t ended = 0;            // started, then ended (finished or failed) by the deadline
  size_t running = 0;          // started, and still running at the deadline
  kvlane::Status first_error;  // of the ended ones
};

// Waits for `handle` until `deadline`, calling `keep_alive` (when set) at least every
// `every` meanwhile. The wait's status: kTimeout when the deadline passed first.
kvlane::Status WaitKeepingAlive(TransferOps* ops, const kvlane::XferHandle& handle,
                                Clock::time_point deadline, const KeepAlive& keep_alive,
                                Clock::duration every) {
  while (true) {
    if (keep_alive) keep_alive();
    const auto left = std::max(deadline - Clock::now(), Clock::duration::zero());
    const bool last = !keep_alive || left <= every;
    kvlane::Status s = ops->Wait(handle, last ? left : every);
    if (s.code() != kvlane::Code::kTimeout || last) return s;
  }
}

// Cancels the pending requests (those not `done`) and waits for them until `deadline`.
Drained Drain(TransferOps* ops, const std::vector<kvlane::XferHandle>& handles,
              const std::vector<bool>& done, Clock::time_point deadline,
              const KeepAlive& keep_alive) {
  for (size_t i = 0; i < handles.size(); ++i) {
    if (!done[i]) (void)ops->Cancel(handles[i]);  // kNotAllowed: a lane has it; waited below
  }
  Drained d;
  for (size_t i = 0; i < handles.size(); ++i) {
    if (done[i]) continue;
    kvlane::Status s = WaitKeepingAlive(ops, handles[i], deadline, keep_alive, Burst::kStopEvery);
    if (s.code() == kvlane::Code::kTimeout) s = ops->Check(handles[i]);  // the wait's, or its own
    if (s.in_progress()) {
      ++d.running;
    } else if (s.code() == kvlane::Code::kCanceled) {
      ++d.canceled;
    } else {
      ++d.ended;
      if (s.is_error() && d.first_error.ok()) d.first_error = s;
    }
  }
  return d;
}

kvlane::Status TimedOut(milliseconds timeout, milliseconds grace, size_t requests,
                        const Drained& d) {
  return kvlane::Status::Timeout(fmt::format(
      "burst did not finish within the control timeout ({} ms): {} of {} request(s) pending; "
      "{} canceled before a lane started them, {} ended within a further {} ms, {} still "
      "running{}",
      timeout.count(), d.canceled + d.ended + d.running, requests, d.canceled, d.ended,
      grace.count(), d.running, d.running > 0 ? " (their memory still in use)" : ""));
}

kvlane::Status Abandoned(milliseconds timeout, milliseconds grace, const Drained& d) {
  if (d.running > 0) {
    return kvlane::Status::Timeout(fmt::format(
        "burst abandoned (the run is stopping), but {} request(s) a lane started still ran "
        "after the control timeout ({} ms) and a further {} ms",
        d.running, timeout.count(), grace.count()));
  }
  if (!d.first_error.ok()) return d.first_error;
  return kvlane::Status::Canceled("burst abandoned: the run is stopping");
}

}  // namespace

kvlane::Result<Burst> Burst::Make(kvlane::Agent* agent, kvlane::Op op, kvlane::PreparedId local,
                                  kvlane::PreparedId remote, const BurstMap& map) {
  auto ops = std::make_unique<AgentTransferOps>(agent);
  Burst b(ops.get());
  b.own_ops_ = std::move(ops);
  b.grace_ = agent->options().io_timeout;
  for (size_t r = 0; r < map.initiator.size(); ++r) {
    KVLANE_ASSIGN_OR_RETURN(kvlane::XferHandle h, agent->MakeTransfer(op, local, map.initiator[r],
                                                                      remote, map.target[r]));
    b.handles_.push_back(h);
    KVLANE_ASSIGN_OR_RETURN(kvlane::XferInfo info, agent->Describe(h));
    b.segments_ += info.segments;
  }
  return b;
}

Burst Burst::Over(TransferOps* ops, std::vector<kvlane::XferHandle> handles, milliseconds grace) {
  Burst b(ops);
  b.handles_ = std::move(handles);
  b.grace_ = grace;
  return b;
}

Burst::Burst(Burst&& other) noexcept
    : own_ops_(std::move(other.own_ops_)),
      ops_(std::exchange(other.ops_, nullptr)),
      handles_(std::move(other.handles_)),
      segments_(other.segments_),
      grace_(other.grace_) {}

Burst::~Burst() { Release(); }

void Burst::Release() {
  if (ops_ == nullptr) return;
  for (kvlane::XferHandle& h : handles_) (void)ops_->Release(&h);  // kNotAllowed: left running
  handles_.clear();
  ops_ = nullptr;
}

size_t Burst::PostAll(std::vector<bool>* done, BurstTiming* t) {
  size_t pending = handles_.size();
  for (size_t i = 0; i < handles_.size(); ++i) {
    kvlane::Status s = ops_->Post(&handles_[i]);
    if (!s.is_error()) continue;
    if (t->status.ok()) t->status = s;
    (*done)[i] = true;
    --pending;
  }
  return pending;
}

size_t Burst::Sweep(Clock::time_point t0, std::vector<bool>* done, BurstTiming* t) {
  size_t ended = 0;
  for (size_t i = 0; i < handles_.size(); ++i) {
    if ((*done)[i]) continue;
    kvlane::Status s = ops_->Check(handles_[i]);
    if (s.in_progress()) continue;
    t->request_ms[i] = MsSince(t0);
    if (s.is_error() && t->status.ok()) t->status = s;
    (*done)[i] = true;
    ++ended;
  }
  return ended;
}

BurstTiming Burst::Run(milliseconds timeout, const StopCheck& stop, const KeepAlive& keep_alive) {
  BurstTiming t;
  t.request_ms.assign(handles_.size(), -1);
  std::vector<bool> done(handles_.size(), false);
  const Clock::time_point t0 = Clock::now();
  const Clock::time_point deadline = t0 + timeout + grace_;  // for the requests a lane started
  Clock::time_point next_ask = t0 + kStopEvery;
  size_t pending = PostAll(&done, &t);
  while (pending > 0) {
    pending -= Sweep(t0, &done, &t);
    if (pending == 0) break;
    const bool timed_out = Clock::now() - t0 > timeout;
    const bool due = Clock::now() >= next_ask;
    if (due) next_ask = Clock::now() + kStopEvery;
    if (due && keep_alive) keep_alive();
    if (timed_out || (due && stop && stop())) {
      const Drained d = Drain(ops_, handles_, done, deadline, keep_alive);
      t.status =
          timed_out ? TimedOut(timeout, grace_, handles_.size(), d) : Abandoned(timeout, grace_, d);
      t.abandoned = !timed_out;
      t.still_running = d.running;
      break;
    }
    std::this_thread::yield();  // share the cores with the engine's lane workers
  }
  t.total_ms = MsSince(t0);
  return t;
}

}  // namespace kvbench
