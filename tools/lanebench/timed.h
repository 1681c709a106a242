// The timed region of one source iteration (source.cc runs it between staging and
// verification): post every transfer in order, then poll Check() until all are
// terminal, with the times the report needs. One thread (the source's poller).
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>

#include "kvlane/status.h"
#include "source_rig.h"

namespace lanebench {

inline constexpr size_t kMaxXfers = 4;

// One iteration's times, per transfer in post order.
struct IterTimes {
  std::array<double, kMaxXfers> lat_us{};   // own post to own completion
  std::array<double, kMaxXfers> done_us{};  // first post to own completion
  std::array<uint32_t, kMaxXfers> sweep{};  // Check() sweep that saw it done
  std::array<double, kMaxXfers> post_us{};  // inside its own Post() call
  // The longest the polling thread went without a look (Post() calls aside)
  // between its own Post() returning and its completion being seen.
  std::array<double, kMaxXfers> stall_us{};
  double window_us = 0;  // first post to last completion
  double gap_us =
      -1;  // previous iteration's last completion to this first post; -1: none before it
};

// Posts every transfer of `rig` in order, then polls them all until terminal.
// `*last_done`: the previous iteration's last completion (in; {} for none), this
// one's (out). A failed Post() or Check() is returned with its code, its message
// naming the transfer ("small (transfer 1): Check(): ..."). Once rig.deadline
// passes with a transfer still open: kTimeout naming every open transfer and the
// last status its Check() returned. Both leave the transfers' state as it is.
// REQUIRES: 1..kMaxXfers transfers, their previous posts finished.
kvlane::Result<IterTimes> TimedIteration(SourceRig& rig,
                                         std::chrono::steady_clock::time_point* last_done);

}  // namespace lanebench
