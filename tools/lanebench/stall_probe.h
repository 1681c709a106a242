// The host-stall probe: how often the polling thread's CPU is taken away from
// it when kvlane is not involved at all. The source runs it on the poller's
// CPU before its iterations: a thread that only reads the clock for a while
// and records every gap between two consecutive reads. A gap of microseconds
// means the thread did not run then (an interrupt, a preempted vCPU, another
// thread on its CPU); the same events land inside timed iterations at the
// same rate, whatever the engine does.
#pragma once

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>

namespace lanebench {

struct HostStalls {
  double spin_ms = 0;      // how long the probe ran
  uint64_t over_5us = 0;   // gaps of at least 5 us
  uint64_t over_10us = 0;  // gaps of at least 10 us
  double max_us = 0;       // the longest gap
  double stalled_pct = 0;  // time inside gaps of at least 5 us, percent of spin_ms
};

// Spins on the calling thread for `duration`, reading the steady clock.
// REQUIRES: duration > 0.
HostStalls ProbeHostStalls(std::chrono::milliseconds duration);

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(HostStalls, spin_ms, over_5us, over_10us, max_us, stalled_pct)

}  // namespace lanebench
