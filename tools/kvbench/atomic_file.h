// Writing a file whole or not at all: the bytes go to a temporary file in the
// target's directory, synced to disk, which is then renamed to the name (one step
// on one file system), and the directory is synced so that the rename lasts. A
// reader, a second run or a crash never leaves half a file or an empty one under
// the name, and a write that fails leaves what was there before. Free functions;
// thread-safe (each call uses a temporary name of its own).
#pragma once

#include <unistd.h>

#include <string>
#include <string_view>

#include "kvlane/status.h"

namespace kvbench {

struct WrittenFile {
  std::string path;
  // A file of that name existed and is now this one. Learned in the rename itself
  // (a rename that refuses to replace first): of calls racing to write one fresh
  // name, exactly one says it replaced nothing.
  bool replaced = false;
};

// Writes `contents` to `path` atomically (see above); creates no directory.
// On failure the temporary file is removed and `path` is left as it was, except
// when only the last step fails (syncing the directory): the file then is under
// its name, whole, but the rename may not outlast a crash.
kvlane::Result<WrittenFile> WriteFileAtomically(const std::string& path, std::string_view contents);

// A writer killed between creating its temporary file and renaming it (SIGKILL:
// no clean-up runs) leaves that file behind: ".<name>.tmp-<pid>-<n>" beside the
// name, <pid> the writer's process id. (A second stop signal that kills a writer
// at once, kvlane_tools::LaterStop::kDie, removes it first: the write names it to
// kvlane_tools::RemoveOnLaterStop before creating it.) Removes every such file of process `pid`
// in `dir` (the launcher, for the ranks it killed) and returns how many; files of
// other names or other processes are left alone, and an unreadable `dir` counts
// none. REQUIRES: `pid` cannot be reused meanwhile (its zombie not yet reaped),
// or it is known to have written nothing there since.
int RemoveTemporaryFiles(const std::string& dir, int pid);

namespace detail {

// Test seam (atomic_file_test): the rename that refuses to replace a file, with
// the contract of renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE): 0, or
// -1 with errno set. EINVAL and ENOSYS say the file system has no such rename:
// the write then takes its fallback, link() and unlink().
using RenameNoReplace = int (*)(const char* from, const char* to);

// Test seam: the sync of the directory once the file has its name, with the
// contract of fsync(dir_fd): 0, or -1 with errno set. EINVAL says the file system
// cannot sync a directory, which is not an error.
using DirSync = int (*)(int dir_fd);

// WriteFileAtomically with `rename_noreplace` in place of renameat2 (a test
// passes one that fails with EINVAL to take the fallback) and `sync_directory`
// in place of fsync on the directory.
kvlane::Result<WrittenFile> WriteFileAtomically(const std::string& path, std::string_view contents,
                                                RenameNoReplace rename_noreplace,
                                                DirSync sync_directory = ::fsync);

}  // namespace detail

}  // namespace kvbench
