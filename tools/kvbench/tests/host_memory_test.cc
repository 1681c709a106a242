#include "host_memory.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace kvbench {
namespace {

namespace fs = std::filesystem;
constexpr uint64_t kGiB = 1ull << 30;

// A fake root: proc/meminfo, proc/self/cgroup and sys/fs/cgroup files, removed at the end.
class FakeRoot {
 public:
  FakeRoot() {
    static int n = 0;
    root_ = fs::temp_directory_path() /
            ("kvbench_host_memory_" + std::to_string(getpid()) + "_" + std::to_string(n++));
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  ~FakeRoot() { fs::remove_all(root_); }
  const fs::path& path() const { return root_; }
  // Writes `text` to root/`rel`, making its directories.
  void Write(const std::string& rel, const std::string& text) {
    fs::create_directories((root_ / rel).parent_path());
    std::ofstream(root_ / rel) << text;
  }
  void MemAvailable(uint64_t bytes) {
    Write("proc/meminfo",
          "MemTotal:       99999999 kB\nMemFree:          1000 kB\n"
          "MemAvailable:   " +
              std::to_string(bytes / 1024) + " kB\nBuffers: 0 kB\n");
  }
  // A cgroup v2 limit and usage at `dir` (relative to sys/fs/cgroup, "" its root).
  void V2(const std::string& dir, const std::string& max, uint64_t current) {
    const std::string at = "sys/fs/cgroup/" + (dir.empty() ? "" : dir + "/");
    Write(at + "memory.max", max + "\n");
    Write(at + "memory.current", std::to_string(current) + "\n");
  }

 private:
  fs::path root_;
};

// A container's limit far below the host's MemAvailable: its headroom (limit less
// usage) is the bound, and the description names the cgroup's numbers.
TEST(HostMemory, ACgroupV2LimitBelowMemAvailableIsTheBound) {
  FakeRoot root;
  root.MemAvailable(23 * kGiB);
  root.Write("proc/self/cgroup", "0::/\n");
  root.V2("", std::to_string(8 * kGiB), 15 * kGiB / 2);
  const HostMemory m = ReadHostMemory(root.path());
  EXPECT_EQ(m.mem_available, 23 * kGiB);
  ASSERT_TRUE(m.cgroup.has_value());
  EXPECT_EQ(m.cgroup->file, "/sys/fs/cgroup/memory.max");
  EXPECT_TRUE(m.CgroupBinds());
  EXPECT_EQ(m.Bytes(), kGiB / 2);
  EXPECT_EQ(m.Describe(),
            "the 0.50 GiB free under cgroup memory.max 8.00 GiB of which 7.50 GiB used "
            "(/sys/fs/cgroup/memory.max; MemAvailable 23.00 GiB)");
}

// A cgroup limit with more headroom than MemAvailable does not bind: MemAvailable does.
TEST(HostMemory, MemAvailableBindsWhenItIsSmaller) {
  FakeRoot root;
  root.MemAvailable(2 * kGiB);
  root.Write("proc/self/cgroup", "0::/\n");
  root.V2("", std::to_string(8 * kGiB), kGiB);
  const HostMemory m = ReadHostMemory(root.path());
  EXPECT_FALSE(m.CgroupBinds());
  EXPECT_EQ(m.Bytes(), 2 * kGiB);
  EXPECT_EQ(m.Describe(), "MemAvailable 2.00 GiB");
}

// "max" is no limit.
TEST(HostMemory, MaxIsNoLimit) {
  FakeRoot root;
  root.MemAvailable(23 * kGiB);
  root.Write("proc/self/cgroup", "0::/\n");
  root.V2("", "max", 20 * kGiB);
  const HostMemory m = ReadHostMemory(root.path());
  EXPECT_FALSE(m.cgroup.has_value());
  EXPECT_EQ(m.Bytes(), 23 * kGiB);
  EXPECT_EQ(m.Describe(), "MemAvailable 23.00 GiB");
}

// cgroup v1: the memory controller's line of /proc/self/cgroup, its files under
// sys/fs/cgroup/memory; v1's "no limit" (a page-rounded LONG_MAX) is no limit.
TEST(HostMemory, ACgroupV1LimitIsReadFromTheMemoryController) {
  FakeRoot root;
  root.MemAvailable(23 * kGiB);
  root.Write("proc/self/cgroup", "5:cpu,cpuacct:/x\n4:memory:/batch/job7\n0::/\n");
  root.Write("sys/fs/cgroup/memory/batch/job7/memory.limit_in_bytes", std::to_string(4 * kGiB));
  root.Write("sys/fs/cgroup/memory/batch/job7/memory.usage_in_bytes", std::to_string(kGiB));
  root.Write("sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
  root.Write("sys/fs/cgroup/memory/memory.usage_in_bytes", std::to_string(9 * kGiB));
  const HostMemory m = ReadHostMemory(root.path());
  ASSERT_TRUE(m.cgroup.has_value());
  EXPECT_EQ(m.cgroup->file, "/sys/fs/cgroup/memory/batch/job7/memory.limit_in_bytes");
  EXPECT_EQ(m.Bytes(), 3 * kGiB);
  EXPECT_NE(m.Describe().find("cgroup memory.limit_in_bytes 4.00 GiB of which 1.00 GiB used"),
            std::string::npos)
      << m.Describe();
}

// A container without its own cgroup namespace (cgroup v1): /proc/self/cgroup names
// the host's path, while the container sees its own cgroup at the mount itself.
TEST(HostMemory, ACgroupPathTheContainerDoesNotSeeIsItsMount) {
  FakeRoot root;
  root.MemAvailable(23 * kGiB);
  root.Write("proc/self/cgroup", "4:memory:/docker/0123abcd\n");
  root.Write("sys/fs/cgroup/memory/memory.limit_in_bytes", std::to_string(2 * kGiB));
  root.Write("sys/fs/cgroup/memory/memory.usage_in_bytes", std::to_string(kGiB));
  const HostMemory m = ReadHostMemory(root.path());
  ASSERT_TRUE(m.cgroup.has_value());
  EXPECT_EQ(m.cgroup->file, "/sys/fs/cgroup/memory/memory.limit_in_bytes");
  EXPECT_EQ(m.Bytes(), kGiB);
}

// A nested cgroup v2 path: the process's own cgroup and each ancestor bound it; the
// one leaving the least headroom applies (here the pod's, above a container without
// a limit), and a sibling's smaller limit does not.
TEST(HostMemory, ANestedCgroupIsBoundByItsTightestAncestor) {
  FakeRoot root;
  root.MemAvailable(23 * kGiB);
  root.Write("proc/self/cgroup", "0::/kubepods/pod1/ctr\n");
  root.V2("kubepods/pod1/ctr", "max", kGiB);
  root.V2("kubepods/pod1", std::to_string(4 * kGiB), 3 * kGiB);
  root.V2("kubepods", std::to_string(16 * kGiB), 10 * kGiB);
  root.V2("kubepods/pod2", std::to_string(kGiB), kGiB / 2);  // not this process's
  const HostMemory m = ReadHostMemory(root.path());
  ASSERT_TRUE(m.cgroup.has_value());
  EXPECT_EQ(m.cgroup->file, "/sys/fs/cgroup/kubepods/pod1/memory.max");
  EXPECT_EQ(m.Bytes(), kGiB);
  EXPECT_NE(m.Describe().find("cgroup memory.max 4.00 GiB of which 3.00 GiB used "
                              "(/sys/fs/cgroup/kubepods/pod1/memory.max;"),
            std::string::npos)
      << m.Describe();
  // Every limited level is kept, innermost first (another rank may share one of them).
  ASSERT_EQ(m.limits.size(), 2u);
  EXPECT_EQ(m.limits[0].file, "/sys/fs/cgroup/kubepods/pod1/memory.max");
  EXPECT_EQ(m.limits[1].file, "/sys/fs/cgroup/kubepods/memory.max");
  EXPECT_EQ(m.limits[1].Headroom(), 6 * kGiB);
  EXPECT_TRUE(m.limits[0].id.Known());
  EXPECT_FALSE(m.limits[0].id.SameAs(m.limits[1].id));
}

// A file that cannot be read (missing, a directory, not a number) is unknown, never
// zero: a limit whose usage is unknown leaves MemAvailable the bound; no MemAvailable
// leaves the cgroup's; neither known is 0 (unknown), checked by nobody.
TEST(HostMemory, UnreadableFilesAreUnknownNotZero) {
  FakeRoot root;
  root.MemAvailable(23 * kGiB);
  root.Write("proc/self/cgroup", "0::/a\n");
  root.Write("sys/fs/cgroup/a/memory.max", std::to_string(kGiB));
  fs::create_directories(root.path() / "sys/fs/cgroup/a/memory.current");  // unreadable
  root.Write("sys/fs/cgroup/memory.max", "lots\n");
  root.Write("sys/fs/cgroup/memory.current", "0\n");
  HostMemory m = ReadHostMemory(root.path());
  EXPECT_FALSE(m.cgroup.has_value());
  EXPECT_EQ(m.Bytes(), 23 * kGiB);

  fs::remove_all(root.path() / "sys/fs/cgroup/a/memory.current");
  root.Write("sys/fs/cgroup/a/memory.current", std::to_string(kGiB / 4));
  fs::remove(root.path() / "proc/meminfo");
  m = ReadHostMemory(root.path());
  EXPECT_EQ(m.mem_available, 0u);
  EXPECT_EQ(m.Bytes(), 3 * kGiB / 4);
  EXPECT_NE(m.Describe().find("; MemAvailable unknown)"), std::string::npos) << m.Describe();

  fs::remove(root.path() / "proc/self/cgroup");
  EXPECT_EQ(ReadHostMemory(root.path()).Bytes(), 0u);
  EXPECT_EQ(ReadHostMemory(root.path() / "nowhere").Bytes(), 0u);
}

// A cgroup at or over its limit has no room: known, 1 B, never 0 (unknown).
TEST(HostMemory, ACgroupWithNoRoomLeftIsKnown) {
  FakeRoot root;
  root.MemAvailable(23 * kGiB);
  root.Write("proc/self/cgroup", "0::/\n");
  root.V2("", std::to_string(kGiB), kGiB + 4096);
  EXPECT_EQ(ReadHostMemory(root.path()).Bytes(), 1u);
}

// The finding: a container that had just built the project read its cgroup as full
// (memory.current at the limit) though most of it was page cache the kernel reclaims
// before it OOM-kills, and kvbench refused a pool that fit. The room is the limit less
// the working set (usage less inactive_file, as docker and the kubelet count it).
TEST(HostMemory, InactiveFileCacheCountsAsRoom) {
  FakeRoot root;
  root.MemAvailable(23 * kGiB);
  root.Write("proc/self/cgroup", "0::/\n");
  root.V2("", std::to_string(8 * kGiB), 8 * kGiB);  // usage at the limit
  root.Write("sys/fs/cgroup/memory.stat",
             "anon 1073741824\nfile 6442450944\nactive_file "
             "1073741824\ninactive_file " +
                 std::to_string(6 * kGiB) + "\nslab 1\n");
  const HostMemory m = ReadHostMemory(root.path());
  ASSERT_TRUE(m.cgroup.has_value());
  EXPECT_EQ(m.cgroup->inactive_file, 6 * kGiB);
  EXPECT_EQ(m.cgroup->WorkingSet(), 2 * kGiB);
  EXPECT_EQ(m.Bytes(), 6 * kGiB);
  EXPECT_EQ(m.Describe(),
            "the 6.00 GiB free under cgroup memory.max 8.00 GiB of which 2.00 GiB used, 6.00 GiB "
            "of inactive file cache not counted (/sys/fs/cgroup/memory.max; MemAvailable 23.00 "
            "GiB)");
  // A 4 GiB pool fits (PoolMemory::Allocate's 90%).
  EXPECT_LE(4 * kGiB, m.Bytes() / 10 * 9);
}

// cgroup v1: memory.stat's hierarchical total_inactive_file, not the cgroup's own
// inactive_file; more cache than usage (read at another moment) leaves 0, not a wrap.
TEST(HostMemory, ACgroupV1CountsItsTotalInactiveFile) {
  FakeRoot root;
  root.MemAvailable(23 * kGiB);
  root.Write("proc/self/cgroup", "4:memory:/job\n");
  root.Write("sys/fs/cgroup/memory/job/memory.limit_in_bytes", std::to_string(4 * kGiB));
  root.Write("sys/fs/cgroup/memory/job/memory.usage_in_bytes", std::to_string(4 * kGiB));
  root.Write("sys/fs/cgroup/memory/job/memory.stat",
             "inactive_file 1024\ntotal_inactive_file " + std::to_string(3 * kGiB) + "\n");
  EXPECT_EQ(ReadHostMemory(root.path()).Bytes(), 3 * kGiB);
  root.Write("sys/fs/cgroup/memory/job/memory.stat",
             "total_inactive_file " + std::to_string(5 * kGiB) + "\n");
  const HostMemory m = ReadHostMemory(root.path());
  EXPECT_EQ(m.cgroup->WorkingSet(), 0u);
  EXPECT_EQ(m.Bytes(), 4 * kGiB);
}

// A memory.stat that cannot be read (missing, a directory) or lacks the key leaves
// the raw usage: no room where usage is at the limit.
TEST(HostMemory, AnUnreadableMemoryStatLeavesTheRawUsage) {
  FakeRoot root;
  root.MemAvailable(23 * kGiB);
  root.Write("proc/self/cgroup", "0::/\n");
  root.V2("", std::to_string(8 * kGiB), 8 * kGiB);
  EXPECT_EQ(ReadHostMemory(root.path()).Bytes(), 1u);  // no memory.stat
  root.Write("sys/fs/cgroup/memory.stat", "active_file 5\ninactive_anon 7\n");
  EXPECT_EQ(ReadHostMemory(root.path()).Bytes(), 1u);  // no inactive_file
  root.Write("sys/fs/cgroup/memory.stat", "inactive_file lots\n");
  EXPECT_EQ(ReadHostMemory(root.path()).Bytes(), 1u);  // not a number
  fs::remove(root.path() / "sys/fs/cgroup/memory.stat");
  fs::create_directories(root.path() / "sys/fs/cgroup/memory.stat");
  const HostMemory m = ReadHostMemory(root.path());
  EXPECT_EQ(m.Bytes(), 1u);
  EXPECT_EQ(m.Describe().find("inactive"), std::string::npos) << m.Describe();
}

// Each limit names its cgroup by its directory's device and inode: the same for the
// same directory, another for another (a sibling's).
TEST(HostMemory, ACgroupLimitNamesItsCgroup) {
  FakeRoot root;
  root.MemAvailable(23 * kGiB);
  root.V2("kubepods/pod1", std::to_string(4 * kGiB), kGiB);
  root.V2("kubepods/pod2", std::to_string(4 * kGiB), kGiB);
  root.Write("proc/self/cgroup", "0::/kubepods/pod1\n");
  const HostMemory one = ReadHostMemory(root.path());
  root.Write("proc/self/cgroup", "0::/kubepods/pod2\n");
  const HostMemory two = ReadHostMemory(root.path());
  ASSERT_TRUE(one.cgroup.has_value() && two.cgroup.has_value());
  EXPECT_TRUE(one.cgroup->id.Known());
  EXPECT_FALSE(one.cgroup->id.SameAs(two.cgroup->id));
  root.Write("proc/self/cgroup", "0::/kubepods/pod1\n");
  EXPECT_TRUE(one.cgroup->id.SameAs(ReadHostMemory(root.path()).cgroup->id));
  EXPECT_FALSE(CgroupId{}.SameAs(CgroupId{}));  // unknown never matches
}

TEST(HostMemory, ThisProcessHasAKnownBound) { EXPECT_GT(ReadHostMemory().Bytes(), 0u); }

}  // namespace
}  // namespace kvbench
