#include "host_memory.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>
#include <vector>

namespace kvbench {
namespace {

namespace fs = std::filesystem;

double GiB(uint64_t bytes) { return bytes / double(1 << 30); }

// The first word of `file`; empty where it cannot be read.
std::string FirstWord(const fs::path& file) {
  std::ifstream in(file);
  std::string word;
  in >> word;
  return word;
}

// A whole non-negative decimal number; nullopt for anything else.
std::optional<uint64_t> ParseBytes(const std::string& word) {
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(word.data(), word.data() + word.size(), v);
  if (word.empty() || ec != std::errc() || end != word.data() + word.size()) return std::nullopt;
  return v;
}

// The value of `key` in a cgroup's memory.stat ("key value" lines), B; 0 where the
// file cannot be read or holds no such line.
uint64_t StatValue(const fs::path& file, const std::string& key) {
  std::ifstream in(file);
  std::string name, value;
  while (in >> name >> value) {
    if (name == key) return ParseBytes(value).value_or(0);
  }
  return 0;
}

CgroupId IdOf(const fs::path& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return {};
  return {static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)};
}

uint64_t ReadMemAvailable(const fs::path& root) {
  std::ifstream in(root / "proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  while (in >> key >> kib) {
    if (key == "MemAvailable:") return kib * 1024;
    in.ignore(256, '\n');
  }
  return 0;
}

// The process's cgroup paths from root/proc/self/cgroup ("ID:CONTROLLERS:PATH"): the
// v2 one ("0::PATH") and the v1 one whose controllers include "memory"; empty: none.
struct CgroupPaths {
  std::string v2, v1_memory;
};
CgroupPaths ReadCgroupPaths(const fs::path& root) {
  CgroupPaths paths;
  std::ifstream in(root / "proc/self/cgroup");
  for (std::string line; std::getline(in, line);) {
    const size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string id = line.substr(0, a), controllers = line.substr(a + 1, b - a - 1);
    const std::string path = line.substr(b + 1);
    if (id == "0" && controllers.empty()) paths.v2 = path;
    std::istringstream names(controllers);
    for (std::string name; std::getline(names, name, ',');) {
      if (name == "memory") paths.v1_memory = path;
    }
  }
  return paths;
}

// The levels of cgroup `path` under the hierarchy mounted at `mount`, relative to
// it, innermost first and the mount itself ("") last; where mount + path does not
// exist, its longest tail that does is the innermost (see ReadHostMemory).
std::vector<fs::path> Levels(const fs::path& mount, const std::string& path) {
  std::error_code ec;
  fs::path rel = fs::path(path).relative_path();
  while (!rel.empty() && !fs::is_directory(mount / rel, ec)) {
    auto it = rel.begin();
    fs::path tail;
    for (++it; it != rel.end(); ++it) tail /= *it;
    rel = tail;
  }
  std::vector<fs::path> levels;
  for (; !rel.empty(); rel = rel.parent_path()) levels.push_back(rel);
  levels.push_back({});
  return levels;
}

// One cgroup hierarchy's files: the limit, the usage, and memory.stat's key for the
// inactive file cache (v1's hierarchical total).
struct Hierarchy {
  const char* shown;  // the mount as the process sees it
  const char* limit_file;
  const char* usage_file;
  const char* inactive_key;
  uint64_t no_limit;  // a limit this large or larger is none
};

// The limit and working set at each level of `path` under hierarchy `h` (mounted at
// root + h.shown) that has a limit, appended to *limits innermost first.
void LimitsUnder(const fs::path& root, const Hierarchy& h, const std::string& path,
                 std::vector<CgroupLimit>* limits) {
  const fs::path mount = root / fs::path(h.shown).relative_path();
  std::error_code ec;
  if (path.empty() || !fs::is_directory(mount, ec)) return;
  for (const fs::path& level : Levels(mount, path)) {
    const fs::path dir = mount / level;
    const std::optional<uint64_t> limit = ParseBytes(FirstWord(dir / h.limit_file));
    const std::optional<uint64_t> usage = ParseBytes(FirstWord(dir / h.usage_file));
    if (!limit || !usage || *limit >= h.no_limit) continue;  // "max", unknown, or no limit
    limits->push_back({(fs::path(h.shown) / level / h.limit_file).lexically_normal().string(),
                       *limit, *usage, StatValue(dir / "memory.stat", h.inactive_key), IdOf(dir)});
  }
}

}  // namespace

std::string MemAvailableText(uint64_t bytes) {
  return bytes == 0 ? std::string("MemAvailable unknown")
                    : fmt::format("MemAvailable {:.2f} GiB", GiB(bytes));
}

std::string CgroupLimit::Describe() const {
  const std::string cache = inactive_file == 0
                                ? std::string()
                                : fmt::format(", {:.2f} GiB of inactive file cache not counted",
                                              GiB(std::min(inactive_file, usage)));
  return fmt::format("the {:.2f} GiB free under cgroup {} {:.2f} GiB of which {:.2f} GiB used{}",
                     GiB(Headroom()), fs::path(file).filename().string(), GiB(limit),
                     GiB(WorkingSet()), cache);
}

bool HostMemory::CgroupBinds() const {
  return cgroup.has_value() && (mem_available == 0 || cgroup->Headroom() < mem_available);
}

uint64_t HostMemory::Bytes() const {
  if (!CgroupBinds()) return mem_available;
  return std::max<uint64_t>(cgroup->Headroom(), 1);
}

std::string HostMemory::Describe() const {
  if (!CgroupBinds()) return MemAvailableText(mem_available);
  return fmt::format("{} ({}; {})", cgroup->Describe(), cgroup->file,
                     MemAvailableText(mem_available));
}

HostMemory FromLimits(uint64_t mem_available, std::vector<CgroupLimit> limits) {
  HostMemory m;
  m.mem_available = mem_available;
  for (const CgroupLimit& c : limits) {
    if (!m.cgroup.has_value() || c.Headroom() < m.cgroup->Headroom()) m.cgroup = c;
  }
  m.limits = std::move(limits);
  return m;
}

HostMemory ReadHostMemory(const fs::path& root) {
  // v2 has "max" for no limit; v1 a page-rounded LONG_MAX. v2's memory.stat counts
  // the cgroup's descendants already; v1's total_ keys do.
  static const Hierarchy kV2{"/sys/fs/cgroup", "memory.max", "memory.current", "inactive_file",
                             UINT64_MAX};
  static const Hierarchy kV1{"/sys/fs/cgroup/memory", "memory.limit_in_bytes",
                             "memory.usage_in_bytes", "total_inactive_file", uint64_t{1} << 62};
  const CgroupPaths paths = ReadCgroupPaths(root);
  std::vector<CgroupLimit> limits;
  LimitsUnder(root, kV2, paths.v2, &limits);
  LimitsUnder(root, kV1, paths.v1_memory, &limits);
  return FromLimits(ReadMemAvailable(root), std::move(limits));
}

}  // namespace kvbench
