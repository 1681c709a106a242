// Provenance a benchmark document records beside its results: the command line
// that ran and the host it ran on (CPU model, kernel, load average...). Shared by
// kvbench and lanebench, so both documents say it alike. Thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace kvlane_tools {

// {"host", "cpus", "cpu_model", "kernel", "date_utc" (now), "loadavg_start" (now)};
// a value the system does not give is "unknown".
nlohmann::json HostEnvironment();

// "/proc/loadavg"'s three averages ("0.52 0.61 0.70").
std::string LoadAverage();

// This process's command line (/proc/self/cmdline), its words joined by spaces, the
// program by its file name alone: "lanebench --transport tcp". Empty where unreadable.
std::string CommandLine();

}  // namespace kvlane_tools
