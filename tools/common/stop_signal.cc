#include "common/stop_signal.h"

#include <signal.h>

#include <cstring>
#include <initializer_list>

namespace kvlane_tools {
namespace {

volatile sig_atomic_t g_stop_signal = 0;
volatile sig_atomic_t g_later = static_cast<sig_atomic_t>(LaterStop::kRecord);

// Async-signal-safe: stores, sigaction and raise only.
extern "C" void OnStop(int sig) {
  const auto later = static_cast<LaterStop>(g_later);
  if (g_stop_signal == 0 || later == LaterStop::kRecord) {
    g_stop_signal = sig;
    return;
  }
  if (later == LaterStop::kIgnore) return;
  struct sigaction default_action = {};
  default_action.sa_handler = SIG_DFL;
  sigemptyset(&default_action.sa_mask);
  sigaction(sig, &default_action, nullptr);
  raise(sig);  // blocked while this handler runs: delivered, and fatal, as it returns
}

}  // namespace

void CatchStopSignals(LaterStop later) {
  g_later = static_cast<sig_atomic_t>(later);
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) {
    struct sigaction old = {};
    sigaction(sig, nullptr, &old);
    if (old.sa_handler == SIG_IGN) continue;
    struct sigaction sa = {};
    sa.sa_handler = OnStop;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, nullptr);
  }
}

int StopSignal() { return g_stop_signal; }

std::string SignalName(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

}  // namespace kvlane_tools
