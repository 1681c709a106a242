#include "atomic_file.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/capability.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/stop_signal.h"

namespace kvbench {
namespace {

namespace fs = std::filesystem;

// A fresh directory under the temp directory, removed with all it holds.
class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() / ("kvbench_atomic_" + std::to_string(getpid()));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }
  const fs::path& path() const { return path_; }
  // The names in the directory.
  std::vector<std::string> Names() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(path_)) names.push_back(e.path().filename());
    return names;
  }

 private:
  fs::path path_;
};

// Runs `fn` on a thread of its own without the capabilities that let root pass
// file permission checks (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH), so that a
// permission test means the same as root (CI) as as anyone else. Linux keeps
// capabilities per thread: the test's own thread keeps its. False when they
// could not be dropped.
template <class F>
bool WithoutDacOverride(F fn) {
  bool dropped = false;
  std::thread t([&] {
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};
    if (syscall(SYS_capget, &header, data) != 0) return;
    data[0].effective &= ~((1u << CAP_DAC_OVERRIDE) | (1u << CAP_DAC_READ_SEARCH));
    if (syscall(SYS_capset, &header, data) != 0) return;
    dropped = true;
    fn();
  });
  t.join();
  return dropped;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A file system without renameat2(RENAME_NOREPLACE) answers EINVAL (most) or
// ENOSYS (an old kernel). Each refusal is counted on its thread, to show that
// the write took the stand-in.
thread_local int t_refused_renames = 0;
template <int kErrno>
int NoRenameat2(const char*, const char*) {
  ++t_refused_renames;
  errno = kErrno;
  return -1;
}

// WriteFileAtomically on such a file system: its link() + unlink() fallback.
template <int kErrno>
kvlane::Result<WrittenFile> WriteWithoutRenameat2(const std::string& path,
                                                  std::string_view contents) {
  const int refused = t_refused_renames;
  auto written = detail::WriteFileAtomically(path, contents, NoRenameat2<kErrno>);
  if (written.ok()) {  // it got as far as the rename
    EXPECT_GT(t_refused_renames, refused) << "the write did not take the stand-in for renameat2";
  }
  return written;
}

// How a test writes: with renameat2 (WriteFileAtomically itself), or with its
// fallback where the file system has no renameat2.
struct Writer {
  const char* name;
  kvlane::Result<WrittenFile> (*write)(const std::string& path, std::string_view contents);
};

void PrintTo(const Writer& w, std::ostream* os) { *os << w.name; }

class AtomicFileWrite : public ::testing::TestWithParam<Writer> {
 protected:
  kvlane::Result<WrittenFile> Write(const std::string& path, std::string_view contents) {
    return GetParam().write(path, contents);
  }
  TempDir dir_;
};

TEST_P(AtomicFileWrite, AFreshNameReplacesNothing) {
  auto written = Write(dir_ / "doc.json", "first\n");
  ASSERT_TRUE(written.ok()) << written.status().message();
  EXPECT_EQ(written->path, dir_ / "doc.json");
  EXPECT_FALSE(written->replaced);
  EXPECT_EQ(ReadFile(dir_ / "doc.json"), "first\n");
  EXPECT_EQ(dir_.Names(), std::vector<std::string>{"doc.json"});  // no temporary file left
}

TEST_P(AtomicFileWrite, AnExistingNameIsReplacedAndSaysSo) {
  ASSERT_TRUE(Write(dir_ / "doc.json", "first\n").ok());
  auto written = Write(dir_ / "doc.json", "second\n");
  ASSERT_TRUE(written.ok()) << written.status().message();
  EXPECT_TRUE(written->replaced);
  EXPECT_EQ(ReadFile(dir_ / "doc.json"), "second\n");
  EXPECT_EQ(dir_.Names(), std::vector<std::string>{"doc.json"});
}

TEST_P(AtomicFileWrite, AFailedWriteLeavesTheNameAlone) {
  ASSERT_TRUE(Write(dir_ / "doc.json", "first\n").ok());
  EXPECT_FALSE(Write(dir_ / "missing/doc.json", "x").ok());
  fs::create_directories(dir_ / "taken");  // a directory cannot be renamed over
  std::ofstream(dir_ / "taken/file") << "x";
  EXPECT_FALSE(Write(dir_ / "taken", "x").ok());
  EXPECT_EQ(ReadFile(dir_ / "doc.json"), "first\n");
  EXPECT_EQ(ReadFile(dir_ / "taken/file"), "x");
  EXPECT_EQ(dir_.Names().size(), 2u);  // doc.json and taken: no temporary file left
}

// A directory under the name cannot be replaced: the error names the rename and
// why, and neither the directory nor a temporary file is left behind changed.
TEST_P(AtomicFileWrite, ADirectoryUnderTheNameIsAClearError) {
  fs::create_directories(dir_ / "taken");
  std::ofstream(dir_ / "taken/file") << "x";
  auto written = Write(dir_ / "taken", "y");
  ASSERT_FALSE(written.ok());
  const std::string message = written.status().message();
  EXPECT_EQ(message.rfind("cannot rename ", 0), 0u) << message;
  EXPECT_NE(message.find(" to " + dir_ / "taken" + ": " + std::strerror(EISDIR)), std::string::npos)
      << message;
  EXPECT_EQ(ReadFile(dir_ / "taken/file"), "x");
  EXPECT_EQ(dir_.Names(), std::vector<std::string>{"taken"});  // no temporary file left
}

// Writers racing to write one fresh name: exactly one of them replaced nothing, in
// every round (checking for the name apart from the rename let several say so).
// link() too refuses an existing name in the same step.
TEST_P(AtomicFileWrite, OfWritersRacingForAFreshNameOneReplacedNothing) {
  constexpr int kWriters = 4, kRounds = 300;
  for (int round = 0; round < kRounds; ++round) {
    const std::string path = dir_ / ("doc" + std::to_string(round) + ".json");
    std::atomic<int> ready{0}, fresh{0};
    std::vector<std::thread> writers;
    for (int w = 0; w < kWriters; ++w) {
      writers.emplace_back([&, w] {
        ready.fetch_add(1);
        while (ready.load() < kWriters) std::this_thread::yield();
        auto written = Write(path, std::to_string(w));
        EXPECT_TRUE(written.ok()) << written.status().message();
        if (written.ok() && !written->replaced) fresh.fetch_add(1);
      });
    }
    for (std::thread& t : writers) t.join();
    ASSERT_EQ(fresh.load(), 1) << "round " << round;
  }
  EXPECT_EQ(dir_.Names().size(), static_cast<size_t>(kRounds));  // no temporary file left
}

INSTANTIATE_TEST_SUITE_P(
    Writers, AtomicFileWrite,
    ::testing::Values(Writer{"renameat2", WriteFileAtomically},
                      Writer{"NoRenameat2EINVAL", WriteWithoutRenameat2<EINVAL>},
                      Writer{"NoRenameat2ENOSYS", WriteWithoutRenameat2<ENOSYS>}),
    [](const auto& info) { return std::string(info.param.name); });

// A name without a directory is written in, and its directory synced as, the
// working directory.
TEST(AtomicFile, ABareNameIsWrittenInTheWorkingDirectory) {
  TempDir dir;
  const fs::path cwd = fs::current_path();
  fs::current_path(dir.path());
  auto written = WriteFileAtomically("doc.json", "first\n");
  fs::current_path(cwd);
  ASSERT_TRUE(written.ok()) << written.status().message();
  EXPECT_EQ(written->path, "doc.json");
  EXPECT_FALSE(written->replaced);
  EXPECT_EQ(ReadFile(dir / "doc.json"), "first\n");
  EXPECT_EQ(dir.Names(), std::vector<std::string>{"doc.json"});
}

// A directory the writer may not write to: the error names the temporary file it
// could not create and why, and the name keeps its file.
TEST(AtomicFile, AnUnwritableDirectoryIsAClearError) {
  TempDir dir;
  ASSERT_TRUE(WriteFileAtomically(dir / "doc.json", "first\n").ok());
  fs::permissions(dir.path(), fs::perms::owner_read | fs::perms::owner_exec);
  kvlane::Result<WrittenFile> written = kvlane::Status::InvalidArgument("not run");
  const bool ran =
      WithoutDacOverride([&] { written = WriteFileAtomically(dir / "doc.json", "second\n"); });
  fs::permissions(dir.path(), fs::perms::owner_all);
  ASSERT_TRUE(ran) << "could not drop CAP_DAC_OVERRIDE";
  ASSERT_FALSE(written.ok());
  const std::string message = written.status().message();
  EXPECT_EQ(message.rfind("cannot create " + dir / ".doc.json.tmp-", 0), 0u) << message;
  EXPECT_NE(message.find(std::strerror(EACCES)), std::string::npos) << message;
  EXPECT_EQ(ReadFile(dir / "doc.json"), "first\n");
  EXPECT_EQ(dir.Names(), std::vector<std::string>{"doc.json"});
}

// A directory the writer may write to but not open (no read permission), so not
// sync: only the last step fails, which the error says; the file is under its
// name, whole, and no temporary file is left.
TEST(AtomicFile, ADirectoryThatCannotBeSyncedIsAClearError) {
  TempDir dir;
  fs::permissions(dir.path(), fs::perms::owner_write | fs::perms::owner_exec);
  kvlane::Result<WrittenFile> written = kvlane::Status::InvalidArgument("not run");
  const bool ran =
      WithoutDacOverride([&] { written = WriteFileAtomically(dir / "doc.json", "first\n"); });
  fs::permissions(dir.path(), fs::perms::owner_all);
  ASSERT_TRUE(ran) << "could not drop CAP_DAC_OVERRIDE";
  ASSERT_FALSE(written.ok());
  EXPECT_EQ(written.status().message(),
            "cannot open " + dir.path().string() + " to sync it: " + std::strerror(EACCES));
  EXPECT_EQ(ReadFile(dir / "doc.json"), "first\n");
  EXPECT_EQ(dir.Names(), std::vector<std::string>{"doc.json"});
}

// The directory opens but will not sync: a stand-in for fsync that fails with
// kErrno and records what it was handed.
int t_sync_fd = -1;
struct stat t_sync_stat {};
template <int kErrno>
int FailingDirSync(int fd) {
  t_sync_fd = fd;
  EXPECT_EQ(fstat(fd, &t_sync_stat), 0);
  errno = kErrno;
  return -1;
}

int RealRenameNoReplace(const char* from, const char* to) {
  return ::renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE);
}

// Only the last step failed, and the error says which: the new file is under its
// name, whole, no temporary file is left, and the directory's descriptor, the one
// the sync was handed, is closed.
TEST(AtomicFile, ADirectorySyncThatFailsIsAClearError) {
  TempDir dir;
  ASSERT_TRUE(WriteFileAtomically(dir / "doc.json", "first\n").ok());
  auto written = detail::WriteFileAtomically(dir / "doc.json", "second\n", RealRenameNoReplace,
                                             FailingDirSync<EIO>);
  ASSERT_FALSE(written.ok());
  EXPECT_EQ(written.status().code(), kvlane::Code::kBackend);
  EXPECT_EQ(written.status().message(),
            "cannot sync " + dir.path().string() + ": " + std::strerror(EIO));
  struct stat want {};
  ASSERT_EQ(stat(dir.path().c_str(), &want), 0);
  EXPECT_TRUE(S_ISDIR(t_sync_stat.st_mode));
  EXPECT_EQ(t_sync_stat.st_ino, want.st_ino);
  EXPECT_EQ(fcntl(t_sync_fd, F_GETFD), -1) << "the directory's descriptor leaked";
  EXPECT_EQ(ReadFile(dir / "doc.json"), "second\n");
  EXPECT_EQ(dir.Names(), std::vector<std::string>{"doc.json"});
}

// A file system that cannot sync a directory (EINVAL) is not an error.
TEST(AtomicFile, ADirectoryThatCannotBeSyncedOnItsFileSystemIsNoError) {
  TempDir dir;
  auto written = detail::WriteFileAtomically(dir / "doc.json", "first\n", RealRenameNoReplace,
                                             FailingDirSync<EINVAL>);
  ASSERT_TRUE(written.ok()) << written.status().message();
  EXPECT_FALSE(written->replaced);
  EXPECT_EQ(ReadFile(dir / "doc.json"), "first\n");
  EXPECT_EQ(dir.Names(), std::vector<std::string>{"doc.json"});
}

// A writer killed between creating its temporary file and renaming it (here it
// exits in the rename itself, as a SIGKILL would end it: no clean-up runs) leaves
// the file; RemoveTemporaryFiles of its pid removes exactly that one, and leaves
// the documents, other writers' temporary files and look-alike names.
TEST(AtomicFile, AKilledWritersTemporaryFileIsFoundByItsPid) {
  TempDir dir;
  const pid_t writer = fork();
  if (writer == 0) {
    (void)detail::WriteFileAtomically(dir / "doc.json", "half\n",
                                      [](const char*, const char*) -> int { _exit(0); });
    _exit(1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(writer, &status, 0), writer);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  const std::string left = ".doc.json.tmp-" + std::to_string(writer) + "-0";
  ASSERT_EQ(dir.Names(), std::vector<std::string>{left});
  const std::string pid = std::to_string(writer);
  const std::vector<std::string> kept = {
      "doc.json", ".doc.json.tmp-" + std::to_string(writer + 1) + "-0",
      ".doc.json.tmp-" + pid + "-0x", "doc.json.tmp-" + pid + "-0", ".tmp-" + pid + "-0"};
  for (const std::string& name : kept) std::ofstream(dir / name) << "keep\n";
  EXPECT_EQ(RemoveTemporaryFiles(dir.path().string(), writer), 1);
  std::vector<std::string> names = dir.Names(), want = kept;
  std::sort(names.begin(), names.end());
  std::sort(want.begin(), want.end());
  EXPECT_EQ(names, want);
  EXPECT_EQ(RemoveTemporaryFiles((dir.path() / "missing").string(), writer), 0);
}

// A rank started by hand dies at once by a second stop (LaterStop::kDie), with no
// clean-up of its own; one that comes while it writes (here in the rename itself,
// the file written and synced) removes the temporary file first: nothing is left,
// and no document appears.
TEST(AtomicFile, ASecondStopWhileWritingLeavesNoTemporaryFile) {
  TempDir dir;
  const pid_t writer = fork();
  if (writer == 0) {
    kvlane_tools::CatchStopSignals(kvlane_tools::LaterStop::kDie);
    raise(SIGINT);  // the first stop: recorded
    (void)detail::WriteFileAtomically(dir / "doc.json", "half\n",
                                      [](const char*, const char*) -> int {
                                        raise(SIGTERM);  // the second: fatal
                                        _exit(1);
                                      });
    _exit(2);
  }
  int status = 0;
  ASSERT_EQ(waitpid(writer, &status, 0), writer);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) << status;
  EXPECT_EQ(dir.Names(), std::vector<std::string>{});
}

}  // namespace
}  // namespace kvbench
