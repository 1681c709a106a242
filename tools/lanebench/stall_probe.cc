#include "stall_probe.h"

namespace lanebench {

HostStalls ProbeHostStalls(std::chrono::milliseconds duration) {
  using Clock = std::chrono::steady_clock;
  constexpr auto k5 = std::chrono::microseconds(5), k10 = std::chrono::microseconds(10);
  HostStalls h;
  Clock::duration longest{}, stalled{};
  const Clock::time_point start = Clock::now(), end = start + duration;
  Clock::time_point prev = start;
  for (Clock::time_point now = prev; now < end; prev = now) {
    now = Clock::now();
    const Clock::duration gap = now - prev;
    if (gap < k5) continue;
    ++h.over_5us;
    if (gap >= k10) ++h.over_10us;
    if (gap > longest) longest = gap;
    stalled += gap;
  }
  const auto us = [](Clock::duration d) {
    return std::chrono::duration<double, std::micro>(d).count();
  };
  h.spin_ms = us(prev - start) / 1e3;
  h.max_us = us(longest);
  h.stalled_pct = h.spin_ms > 0 ? us(stalled) / (h.spin_ms * 1e3) * 100.0 : 0;
  return h;
}

}  // namespace lanebench
