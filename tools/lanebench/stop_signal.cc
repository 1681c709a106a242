#include "stop_signal.h"

#include <signal.h>

#include <cstring>
#include <initializer_list>

namespace lanebench {
namespace {

volatile sig_atomic_t g_stop_signal = 0;

void OnStop(int sig) { g_stop_signal = sig; }

}  // namespace

void CatchStopSignals() {
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

}  // namespace lanebench
