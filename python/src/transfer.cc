#include "transfer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <utility>

#include "scoped_flag.h"
#include "status.h"

namespace kvlane::python {
namespace {

using Clock = std::chrono::steady_clock;

// Posts of more chunks than this release the GIL: queueing them takes long
// enough to pay for it. Smaller ones keep it (a post never allocates), unless
// it may wait: their lane ring lacks room (Agent::PostMayWait), another
// thread is inside a call of the agent with the GIL released (a large post
// may take the room PostMayWait saw; a deregistration holds the registry lock
// a post may need), or the transfer notifies (the posting thread may be the
// one that sends it: a round trip to the peer). Such a post would block every
// Python thread, up to AgentOptions::post_timeout or io_timeout.
constexpr uint32_t kUnlockedPostChunks = 64;
// wait() blocks in slices this long and looks for signals (Ctrl-C) between them.
constexpr std::chrono::nanoseconds kWaitSlice = std::chrono::milliseconds(100);

}  // namespace

PyTransfer::PyTransfer(py::object owner, XferHandle handle, Op op, uint32_t chunks, bool notifies)
    : owner_(std::move(owner)),
      agent_(owner_.cast<PyAgent*>()),
      handle_(handle),
      op_(op),
      chunks_(chunks),
      notifies_(notifies) {}

PyAgent& PyTransfer::Use() {
  if (released()) throw py::value_error("the kvlane.Transfer is released");
  if (busy_)
    throw std::runtime_error(
        "a kvlane.Transfer is used by one thread at a time: another thread is inside its "
        "post(), wait() or release()");
  agent_->agent();  // raises once closed
  return *agent_;
}

template <typename F>
auto PyTransfer::Blocking(F&& fn) {
  PyAgent& agent = Use();
  const ScopedFlag busy(&busy_);
  XferHandle h = handle_;  // the engine works on a copy while the GIL is released
  auto result = agent.Blocking([&](Agent& a) { return fn(a, h); });
  handle_ = h;
  return result;
}

PyTransfer::~PyTransfer() {
  if (released() || agent_->closed()) return;
  try {
    const Status s = Blocking([](Agent& a, XferHandle& h) {
      // Still in flight: canceled where no lane has started it, and left to
      // the agent. Release would wait for the lane to retire it, which behind
      // a stalled peer takes up to io_timeout (a garbage collection, an event
      // loop stuck meanwhile).
      if (a.Check(h).in_progress()) {
        (void)a.Cancel(h);
        return Status::NotAllowed("in flight");
      }
      return a.Release(&h);
    });
    // A lane owns part of it (or, kTimeout, still holds a post the GPU
    // published): its agent releases it later, not this thread now.
    if (s.code() == Code::kNotAllowed || s.code() == Code::kTimeout) agent_->Orphan(handle_);
  } catch (...) {
    // A destructor does not raise (a closed agent, another process after a
    // fork): a slot it could not release stays taken.
  }
}

py::object PyTransfer::Post() {
  Agent& agent = Use().agent();  // before marking: a refused call leaves posting_ alone
  if (chunks_ <= kUnlockedPostChunks && !notifies_ && !agent_->others_blocking() &&
      !agent.PostMayWait(handle_))
    return CodeOrRaise(agent.Post(&handle_));
  const ScopedFlag posting(&posting_);
  return CodeOrRaise(Blocking([](Agent& a, XferHandle& h) { return a.Post(&h); }));
}

py::object PyTransfer::Check() {
  if (released()) throw py::value_error("the kvlane.Transfer is released");
  // Another thread's post is queueing a new generation on a copy of the handle:
  // handle_ still names the previous one, which the engine now calls stale.
  if (posting_) return CodeOrRaise(Status::InProgress());
  return CodeOrRaise(agent_->agent().Check(handle_));  // no busy check: one load
}

py::object PyTransfer::Wait(std::optional<double> timeout_s) {
  std::optional<Clock::time_point> deadline;
  if (timeout_s) {
    if (!std::isfinite(*timeout_s) || *timeout_s < 0)
      throw py::value_error("timeout_s must be None or a finite number >= 0");
    const std::chrono::duration<double> t(std::min(*timeout_s, 1e9));
    deadline = Clock::now() + std::chrono::duration_cast<std::chrono::nanoseconds>(t);
  }
  for (;;) {
    if (agent_->stopping())  // another thread's close() waits for this call to end
      RaiseIfError(Status::Canceled("kvlane.Agent.close() was called: wait() gave up"));
    std::chrono::nanoseconds slice = kWaitSlice;
    if (deadline) slice = std::clamp<std::chrono::nanoseconds>(*deadline - Clock::now(), {}, slice);
    Status s = Blocking([&](Agent& a, XferHandle& h) {
      Status w = a.Wait(h, slice);
      // kTimeout is also a terminal code: Check tells the two apart.
      return w.code() == Code::kTimeout ? a.Check(h) : w;
    });
    if (!s.in_progress() || (deadline && Clock::now() >= *deadline)) return CodeOrRaise(s);
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
  }
}

void PyTransfer::Cancel() { RaiseIfError(Use().agent().Cancel(handle_)); }

void PyTransfer::Release() {
  if (released()) return;
  if (agent_->closed()) {  // the handle went with its agent
    handle_ = XferHandle{};
    return;
  }
  RaiseIfError(Blocking([](Agent& a, XferHandle& h) { return a.Release(&h); }));
}

XferInfo PyTransfer::Describe() { return ValueOrRaise(Use().agent().Describe(handle_)); }

}  // namespace kvlane::python
