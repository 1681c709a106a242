// How much memory this process may still take from its host before the OOM killer
// strikes: /proc/meminfo's MemAvailable, or, where smaller, what a cgroup memory
// limit on the process leaves: the limit (v2 memory.max, v1 memory.limit_in_bytes)
// less the cgroup's working set, its usage (memory.current, memory.usage_in_bytes)
// less the inactive file cache the kernel reclaims before it OOM-kills (memory.stat's
// inactive_file, v1 total_inactive_file), as docker and the kubelet count it. In a
// container the cgroup's headroom may be far below the host's MemAvailable. Read
// from files under a root directory ("/" for the process itself; a fake tree in
// tests). Plain values and free functions; thread-safe.
#pragma once

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace kvbench {

// Which cgroup a limit belongs to: the device and inode of its directory, alike for
// every process in it whatever its cgroup namespace or mount. ino 0: unknown.
struct CgroupId {
  uint64_t dev = 0, ino = 0;
  bool Known() const { return ino != 0; }
  // Known and equal: the same cgroup.
  bool SameAs(const CgroupId& o) const { return Known() && dev == o.dev && ino == o.ino; }
};

// One cgroup's memory limit on this process and what the cgroup uses of it.
struct CgroupLimit {
  std::string file;    // the limit's file as the process sees it: "/sys/fs/cgroup/a/memory.max"
  uint64_t limit = 0;  // B
  uint64_t usage = 0;  // B, the kernel's count, page cache included
  uint64_t inactive_file = 0;  // B of that usage the kernel reclaims first; 0: none or unknown
  CgroupId id;
  // Usage less the inactive file cache, never below 0.
  uint64_t WorkingSet() const { return usage - std::min(inactive_file, usage); }
  uint64_t Headroom() const { return WorkingSet() < limit ? limit - WorkingSet() : 0; }
  // "the 0.50 GiB free under cgroup memory.max 8.00 GiB of which 7.50 GiB used", and
  // ", 1.20 GiB of inactive file cache not counted" where there was some.
  std::string Describe() const;
};

struct HostMemory {
  uint64_t mem_available = 0;  // /proc/meminfo MemAvailable, B; 0: unknown
  // The cgroup limit that leaves the least headroom, of those on the process's
  // cgroup and its ancestors (each bounds it); none: no limit ("max"), or unknown.
  std::optional<CgroupLimit> cgroup;
  // Every limit on the process's cgroup and its ancestors (v2's, then v1's, each
  // innermost first); `cgroup` is the one of them that leaves least. Another process
  // under an ancestor here shares that ancestor's room (host_pools.h).
  std::vector<CgroupLimit> limits;

  // Whether the cgroup's headroom is the bound that applies (smaller than
  // MemAvailable, or MemAvailable unknown).
  bool CgroupBinds() const;
  // The bound that applies, B: the smaller of MemAvailable and the cgroup's headroom,
  // those known; 0: neither known. A cgroup with no room left reads 1 (known, and
  // too small for any pool), never 0.
  uint64_t Bytes() const;
  // Which bound applies, for an error: "MemAvailable 23.00 GiB", or "the 0.50 GiB
  // free under cgroup memory.max 8.00 GiB of which 7.50 GiB used
  // (/sys/fs/cgroup/a/memory.max; MemAvailable 23.00 GiB)".
  std::string Describe() const;
};

// A HostMemory of `mem_available` under `limits`, its `cgroup` the one of them that
// leaves least headroom (the first of those that leave equally little).
HostMemory FromLimits(uint64_t mem_available, std::vector<CgroupLimit> limits);

// "MemAvailable 23.00 GiB", or "MemAvailable unknown" for 0.
std::string MemAvailableText(uint64_t bytes);

// MemAvailable from root/proc/meminfo, and the cgroup limits of the process named
// by root/proc/self/cgroup: cgroup v2 ("0::/path") under root/sys/fs/cgroup, cgroup
// v1 (the line whose controllers include "memory") under root/sys/fs/cgroup/memory.
// A cgroup's directory is the mount plus its path, else the mount plus a shorter
// tail of the path, down to the mount itself (a container that mounts its own
// cgroup as the root while /proc/self/cgroup names the host's path). Every level
// from there up to the mount counts. A limit or usage file that cannot be read or
// parsed is unknown, never zero; "max" (v2) or a v1 limit of 2^62 or more (v1's
// "none") is no limit. A memory.stat that cannot be read, or lacks the key, counts
// no inactive file cache (the raw usage).
HostMemory ReadHostMemory(const std::filesystem::path& root = "/");

}  // namespace kvbench
