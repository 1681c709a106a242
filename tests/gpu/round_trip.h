// The host side of the request-to-record probes (cuda_bar_doorbell_probe,
// cuda_push_read_probe, cuda_proxy_shape_probe): request k = 1, 2, ...,
// kRounds, each after a random 0-3 us wait (so that it lands at a random phase
// of the GPU's polling), timed from the request to its record landing; the
// first kWarm are not kept.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "percentile.h"

namespace kvlane::test {

inline constexpr uint64_t kRounds = 3000, kWarm = 200;

struct RoundTrips {
  std::vector<double>
      us;  // microseconds of requests warm + 1, ... (the last may be the one that stopped)
  std::vector<std::chrono::steady_clock::time_point> at;  // when each of those was made
  uint64_t issued = 0;  // requests made: the next is issued + 1
  std::string error;    // why the rounds stopped early; empty: they did not
};

// `request(k)` makes request k and returns "" or why it failed; `landed(k)` is
// true once its record is seen. Stops at a failed request or one not landed
// within 100 ms. `seed` draws the waits. `rounds` requests, the first `warm`
// not kept.
template <class Request, class Landed>
RoundTrips TimeRoundTrips(uint32_t seed, Request&& request, Landed&& landed,
                          uint64_t rounds = kRounds, uint64_t warm = kWarm) {
  using Clock = std::chrono::steady_clock;
  RoundTrips r;
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> wait_ns(0, 3000);
  for (uint64_t k = 1; k <= rounds && r.error.empty(); ++k) {
    const auto until = Clock::now() + std::chrono::nanoseconds(wait_ns(rng));
    while (Clock::now() < until) {
    }
    const auto t0 = Clock::now();
    r.error = request(k);
    r.issued = k;
    while (r.error.empty() && !landed(k))
      if (Clock::now() - t0 > std::chrono::milliseconds(100)) r.error = "no record within 100 ms";
    if (k > warm) {
      r.us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
      r.at.push_back(t0);
    }
  }
  return r;
}

// One line: "name: p50 .. us  p90 ..  p99 ..  (n=.., note)", or why the rounds
// stopped; `width` pads the name.
inline void PrintRoundTrips(const char* name, int width, const RoundTrips& r,
                            const std::string& note) {
  if (!r.error.empty() || r.us.empty()) {
    std::printf("%-*s: STUCK (%s; %s)\n", width, name,
                r.error.empty() ? "no samples" : r.error.c_str(), note.c_str());
    return;
  }
  std::printf("%-*s: p50 %.2f us  p90 %.2f  p99 %.2f  (n=%zu, %s)\n", width, name, Pct(r.us, 50),
              Pct(r.us, 90), Pct(r.us, 99), r.us.size(), note.c_str());
}

}  // namespace kvlane::test
