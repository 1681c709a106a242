#include "burst_progress.h"

#include <fmt/format.h>

namespace kvbench {

std::string BurstProgress(int64_t burst, int64_t warmup, int64_t timed, double seconds) {
  std::string s = burst <= warmup ? fmt::format("warm-up burst {}/{}", burst, warmup)
                                  : fmt::format("timed burst {}/{}", burst - warmup, timed);
  if (burst > 1) {  // each burst moves the same bytes
    const double each = seconds / double(burst - 1);
    s += fmt::format(", about {:.0f} s left in them", each * double(warmup + timed - burst + 1));
  }
  return s;
}

}  // namespace kvbench
