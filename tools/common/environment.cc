#include "environment.h"

#include <sys/utsname.h>

#include <fstream>
#include <iterator>
#include <thread>
#include <vector>

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

std::string ShellQuote(const std::string& word) {
  static const char kPlain[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_@%+=:,./-";
  if (!word.empty() && word.find_first_not_of(kPlain) == std::string::npos) return word;
  std::string quoted = "'";
  for (char c : word) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

std::string JoinShellWords(const std::vector<std::string>& words) {
  std::string line;
  for (const std::string& word : words) line += (line.empty() ? "" : " ") + ShellQuote(word);
  return line;
}

std::string CommandLine() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> words;
  for (size_t start = 0, end; start < raw.size(); start = end + 1) {
    end = raw.find('\0', start);
    if (end == std::string::npos) end = raw.size();
    words.push_back(raw.substr(start, end - start));
  }
  if (!words.empty()) words[0] = words[0].substr(words[0].rfind('/') + 1);  // npos + 1 == 0
  return JoinShellWords(words);
}

}  // namespace kvlane_tools
