// Provenance a benchmark document records beside its results: the command line
// that ran and the host it ran on (CPU model, kernel, load average...). Shared by
// kvbench and lanebench, so both documents say it alike. Thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace kvlane_tools {

// {"host", "cpus", "cpu_model", "kernel", "date_utc" (now), "loadavg_start" (now)};
// a value the system does not give is "unknown".
nlohmann::json HostEnvironment();

// "/proc/loadavg"'s three averages ("0.52 0.61 0.70").
std::string LoadAverage();

// This process's command line (/proc/self/cmdline), its words joined by spaces and
// shell-quoted where they need it (JoinShellWords), the program by its file name
// alone: "lanebench --transport tcp", "kvbench run --case 'a b'". Empty where unreadable.
std::string CommandLine();

// `word` as a POSIX shell reads it back as one word: as it is when it holds only
// letters, digits and _@%+=:,./- (and is not empty), else in single quotes (a ' in
// it as '\'').
std::string ShellQuote(const std::string& word);

// The words, each ShellQuote'd, joined by spaces.
std::string JoinShellWords(const std::vector<std::string>& words);

}  // namespace kvlane_tools
