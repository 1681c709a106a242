// What a row's progress line says of its bursts (RowRunner::TellProgress): the
// warm-up bursts and the timed bursts counted apart, so that a warm-up burst never
// reads as a timed one. Pure logic; thread-safe.
#pragma once

#include <cstdint>
#include <string>

namespace kvbench {

// Burst `burst` (from 1) of a row's `warmup` warm-up bursts followed by `timed`
// timed bursts: "warm-up burst 1/2" or "timed burst 3/50", then, after the first
// burst, the time left in the row's bursts (warm-up included) at the pace of those
// so far, `seconds` having passed since the first began: ", about 95 s left in them".
// REQUIRES: 1 <= burst <= warmup + timed.
std::string BurstProgress(int64_t burst, int64_t warmup, int64_t timed, double seconds);

}  // namespace kvbench
