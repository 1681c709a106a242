#include "timed.h"

#include <algorithm>
#include <string>
#include <thread>

namespace lanebench {
namespace {

using Clock = std::chrono::steady_clock;
using Stamps = std::array<Clock::time_point, kMaxXfers>;
using Sweeps = std::array<uint32_t, kMaxXfers>;
using Gaps = std::array<Clock::duration, kMaxXfers>;

double Us(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

// The polling thread's own timeline: every look at the clock between the
// transfers' Post() calls and their completions. A long gap between two looks
// is time this thread did not run (preempted, interrupted), not engine time:
// Post() calls are left out, and a sweep of Check() calls is a few host-memory
// reads.
class Looks {
 public:
  explicit Looks(size_t n) : n_(n) {}
  // Transfer i's Post() returned at `now`: its watch starts. The time since
  // the last look was spent inside Post(), the engine's time: not a gap.
  void PostReturned(size_t i, Clock::time_point now) {
    prev_ = now;
    watching_[i] = true;
  }
  void Look(Clock::time_point now) {
    if (prev_ != Clock::time_point{}) {
      const Clock::duration gap = now - prev_;
      for (size_t i = 0; i < n_; ++i)
        if (watching_[i] && gap > longest_[i]) longest_[i] = gap;
    }
    prev_ = now;
  }
  void Finished(size_t i) { watching_[i] = false; }
  const Gaps& longest() const { return longest_; }

 private:
  size_t n_;
  Clock::time_point prev_{};
  std::array<bool, kMaxXfers> watching_{};
  Gaps longest_{};
};

// "small (transfer 1)": a transfer as errors name it.
std::string XferName(const SourceRig& rig, size_t i) {
  return rig.xfers[i].spec.name + " (transfer " + std::to_string(i) + ")";
}

// `s` (an error) with its message prefixed by transfer i's name and the call.
kvlane::Status Named(const SourceRig& rig, size_t i, const char* call, const kvlane::Status& s) {
  return {s.code(), XferName(rig, i) + ": " + call + ": " + s.ToString()};
}

// Polled transfers: which ended, and the last code each Check() returned.
struct Polled {
  std::array<bool, kMaxXfers> finished{};
  std::array<kvlane::Code, kMaxXfers> last{};
};

kvlane::Status NotDone(const SourceRig& rig, const Polled& p) {
  std::string open;
  for (size_t i = 0; i < rig.xfers.size(); ++i)
    if (!p.finished[i])
      open += (open.empty() ? "" : ", ") + rig.xfers[i].spec.name + " (transfer " +
              std::to_string(i) + "; last Check(): " + kvlane::CodeName(p.last[i]) + ")";
  return kvlane::Status::Timeout("not complete by the source's deadline: " + open);
}

// Polls Check() on every open transfer, the latest post first, until all are
// terminal; yields the CPU only after a sweep that saw nothing finish, and gives
// up after such a sweep that began past rig.deadline (the clock read the sweep
// takes anyway: nothing more in the timed path). done[i] is when transfer i was
// first seen terminal, sweep[i] in which sweep. Under global-fifo an earlier post
// is published first, so it is seen in the same sweep as a later one at the
// latest: a lower sweep is a real "done first".
kvlane::Status AwaitAll(SourceRig& rig, Stamps& done, Sweeps& sweep, Looks& looks) {
  Polled p;
  p.last.fill(kvlane::Code::kInProgress);
  size_t left = rig.xfers.size();
  for (uint32_t k = 0; left > 0; ++k) {
    const size_t before = left;
    const Clock::time_point began = Clock::now();
    looks.Look(began);
    for (size_t i = rig.xfers.size(); i-- > 0;) {
      if (p.finished[i]) continue;
      kvlane::Status s = rig.agent->Check(rig.xfers[i].handle);
      p.last[i] = s.code();
      if (s.in_progress()) continue;
      done[i] = Clock::now();
      looks.Look(done[i]);
      looks.Finished(i);
      if (s.is_error()) return Named(rig, i, "Check()", s);
      p.finished[i] = true;
      sweep[i] = k;
      --left;
    }
    if (left < before) continue;
    if (began >= rig.deadline) return NotDone(rig, p);
    std::this_thread::yield();  // the lanes' threads may share this core
  }
  return kvlane::Status::Ok();
}

}  // namespace

kvlane::Result<IterTimes> TimedIteration(SourceRig& rig, Clock::time_point* last_done) {
  Stamps post{}, posted{}, done{};
  Sweeps sweep{};
  Looks looks(rig.xfers.size());
  for (size_t i = 0; i < rig.xfers.size(); ++i) {
    post[i] = Clock::now();
    looks.Look(post[i]);
    kvlane::Status s = rig.agent->Post(&rig.xfers[i].handle);
    if (s.is_error()) return Named(rig, i, "Post()", s);
    posted[i] = Clock::now();
    looks.PostReturned(i, posted[i]);
  }
  KVLANE_RETURN_IF_ERROR(AwaitAll(rig, done, sweep, looks));
  IterTimes t;
  Clock::time_point last = post[0];
  for (size_t i = 0; i < rig.xfers.size(); ++i) {
    t.lat_us[i] = Us(done[i] - post[i]);
    t.done_us[i] = Us(done[i] - post[0]);
    t.post_us[i] = Us(posted[i] - post[i]);
    t.stall_us[i] = Us(looks.longest()[i]);
    t.sweep[i] = sweep[i];
    last = std::max(last, done[i]);
  }
  t.window_us = Us(last - post[0]);
  t.gap_us = *last_done == Clock::time_point{} ? -1 : Us(post[0] - *last_done);
  *last_done = last;
  return t;
}

}  // namespace lanebench
