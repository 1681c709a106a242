#include "common/stop_signal.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <initializer_list>

namespace kvlane_tools {
namespace {

// Atomics, not volatile sig_atomic_t: the handler runs on whichever thread the
// kernel picks, the rank threads of one process (kvbench's local transport) read
// the signal and both install the handler. Lock-free, so async-signal-safe.
// Relaxed: each value is the whole message, nothing else is published with it.
std::atomic<int> g_stop_signal{0};
std::atomic<int> g_later{static_cast<int>(LaterStop::kRecord)};
static_assert(std::atomic<int>::is_always_lock_free, "the handler needs lock-free atomics");

// RemoveOnLaterStop's slots. A slot goes kFree -> kFilling -> kArmed by its guard
// (the path written in between, published by the release store of kArmed) and back
// to kFree when the guard goes (release; the next guard's taking it acquires, so
// two guards' path writes never race); the handler takes an armed slot (kArmed ->
// kRemoving, acquire: it reads the whole path) and keeps it, the process dying.
enum SlotState : int { kFree, kFilling, kArmed, kRemoving };
struct RemovedSlot {
  std::atomic<int> state{kFree};
  char path[RemoveOnLaterStop::kMaxRemovedPath];
};
RemovedSlot g_removed[RemoveOnLaterStop::kMaxRemovedOnStop];

// Async-signal-safe: lock-free atomics and unlink only.
void RemoveArmedFiles() {
  for (RemovedSlot& slot : g_removed) {
    int armed = kArmed;
    if (slot.state.compare_exchange_strong(armed, kRemoving, std::memory_order_acquire)) {
      unlink(slot.path);
    }
  }
}

// Async-signal-safe: lock-free atomics, unlink, sigaction and raise only.
extern "C" void OnStop(int sig) {
  const auto later = static_cast<LaterStop>(g_later.load(std::memory_order_relaxed));
  if (later == LaterStop::kRecord) {
    g_stop_signal.store(sig, std::memory_order_relaxed);
    return;
  }
  // One first stop: two signals handled on two threads at once must not both
  // take it (the second would then not act as a later stop).
  int none = 0;
  if (g_stop_signal.compare_exchange_strong(none, sig, std::memory_order_relaxed)) return;
  if (later == LaterStop::kIgnore) return;
  const int saved = errno;
  RemoveArmedFiles();
  errno = saved;
  struct sigaction default_action = {};
  default_action.sa_handler = SIG_DFL;
  sigemptyset(&default_action.sa_mask);
  sigaction(sig, &default_action, nullptr);
  raise(sig);  // blocked while this handler runs: delivered, and fatal, as it returns
}

}  // namespace

void CatchStopSignals(LaterStop later) {
  g_later.store(static_cast<int>(later), std::memory_order_relaxed);
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) {
    struct sigaction old = {};
    sigaction(sig, nullptr, &old);
    if (old.sa_handler == SIG_IGN) continue;
    struct sigaction sa = {};
    sa.sa_handler = OnStop;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    for (int other : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&sa.sa_mask, other);  // one at a time
    sigaction(sig, &sa, nullptr);
  }
}

int StopSignal() { return g_stop_signal.load(std::memory_order_relaxed); }

RemoveOnLaterStop::RemoveOnLaterStop(const std::string& path) {
  if (path.size() >= kMaxRemovedPath) return;
  for (int i = 0; i < kMaxRemovedOnStop; ++i) {
    int free = kFree;
    // Acquire: pairs with the release by which the slot's last guard gave it back,
    // whose path writes then come before ours.
    if (!g_removed[i].state.compare_exchange_strong(free, kFilling, std::memory_order_acquire)) {
      continue;
    }
    std::memcpy(g_removed[i].path, path.c_str(), path.size() + 1);
    g_removed[i].state.store(kArmed, std::memory_order_release);  // pairs with the handler's
    slot_ = i;
    return;
  }
}

RemoveOnLaterStop::~RemoveOnLaterStop() {
  if (slot_ < 0) return;
  int armed = kArmed;  // kRemoving: the handler has it, and the process is dying
  g_removed[slot_].state.compare_exchange_strong(armed, kFree, std::memory_order_release);
}

std::string SignalName(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

}  // namespace kvlane_tools
