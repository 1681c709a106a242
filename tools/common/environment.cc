#include "environment.h"

#include <sys/utsname.h>

#include <fstream>
#include <iterator>
#include <thread>

#include "kvlane/provenance.h"

namespace kvlane_tools {
namespace {

std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown";
}

}  // namespace

nlohmann::json HostEnvironment() {
  utsname u{};
  const bool named = uname(&u) == 0;
  return {{"host", kvlane::HostName()},
          {"cpus", std::thread::hardware_concurrency()},
          {"cpu_model", CpuModel()},
          {"kernel", named ? std::string(u.sysname) + " " + u.release : "unknown"},
          {"date_utc", kvlane::UtcTimestamp()},
          {"loadavg_start", LoadAverage()}};
}

std::string LoadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string one, five, fifteen;
  if (!(in >> one >> five >> fifteen)) return "unknown";
  return one + " " + five + " " + fifteen;
}

std::string CommandLine() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string line;
  size_t start = 0;
  for (size_t end; start < raw.size(); start = end + 1) {
    end = raw.find('\0', start);
    if (end == std::string::npos) end = raw.size();
    std::string word = raw.substr(start, end - start);
    if (line.empty()) word = word.substr(word.rfind('/') + 1);  // npos + 1 == 0
    line += (line.empty() ? "" : " ") + word;
  }
  return line;
}

}  // namespace kvlane_tools
