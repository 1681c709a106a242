#include "host_memory.h"

#include <fmt/format.h>

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

// The limit in `limit_file` and the usage in `usage_file` at each level of `path`
// under `mount` (`shown`: the mount as the process sees it); the one that leaves
// the least headroom replaces *tightest when it leaves less.
void TightestUnder(const fs::path& root, const char* shown, const std::string& path,
                   const char* limit_file, const char* usage_file, uint64_t no_limit,
                   std::optional<CgroupLimit>* tightest) {
  const fs::path mount = root / fs::path(shown).relative_path();
  std::error_code ec;
  if (path.empty() || !fs::is_directory(mount, ec)) return;
  for (const fs::path& level : Levels(mount, path)) {
    const std::optional<uint64_t> limit = ParseBytes(FirstWord(mount / level / limit_file));
    const std::optional<uint64_t> usage = ParseBytes(FirstWord(mount / level / usage_file));
    if (!limit || !usage || *limit >= no_limit) continue;  // "max", unknown, or no limit
    CgroupLimit c{(fs::path(shown) / level / limit_file).lexically_normal().string(), *limit,
                  *usage};
    if (!tightest->has_value() || c.Headroom() < (*tightest)->Headroom()) *tightest = c;
  }
}

}  // namespace

bool HostMemory::CgroupBinds() const {
  return cgroup.has_value() && (mem_available == 0 || cgroup->Headroom() < mem_available);
}

uint64_t HostMemory::Bytes() const {
  if (!CgroupBinds()) return mem_available;
  return std::max<uint64_t>(cgroup->Headroom(), 1);
}

std::string HostMemory::Describe() const {
  const std::string available = mem_available == 0
                                    ? std::string("MemAvailable unknown")
                                    : fmt::format("MemAvailable {:.2f} GiB", GiB(mem_available));
  if (!CgroupBinds()) return available;
  const std::string name = fs::path(cgroup->file).filename().string();
  return fmt::format(
      "the {:.2f} GiB free under cgroup {} {:.2f} GiB of which {:.2f} GiB used ({}; {})",
      GiB(cgroup->Headroom()), name, GiB(cgroup->limit), GiB(cgroup->usage), cgroup->file,
      available);
}

HostMemory ReadHostMemory(const fs::path& root) {
  HostMemory m;
  m.mem_available = ReadMemAvailable(root);
  const CgroupPaths paths = ReadCgroupPaths(root);
  // v2 has "max" for no limit; v1 a page-rounded LONG_MAX.
  TightestUnder(root, "/sys/fs/cgroup", paths.v2, "memory.max", "memory.current", UINT64_MAX,
                &m.cgroup);
  TightestUnder(root, "/sys/fs/cgroup/memory", paths.v1_memory, "memory.limit_in_bytes",
                "memory.usage_in_bytes", uint64_t{1} << 62, &m.cgroup);
  return m;
}

}  // namespace kvbench
