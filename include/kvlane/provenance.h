// Provenance for tools that record where and when they ran (benchmark
// documents): the host's name and the time in UTC. Header-only, so that code
// which does not link the engine (kvbench's pure logic) can use it too.
#pragma once

#include <unistd.h>

#include <ctime>
#include <string>

namespace kvlane {

// This host's name; "unknown" when the system does not say.
inline std::string HostName() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "unknown";
  return buf;
}

// Now in UTC, to the second: "2026-11-30T08:11:18Z".
inline std::string UtcTimestamp() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace kvlane
