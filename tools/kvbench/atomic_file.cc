#include "atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>

#include "common/stop_signal.h"

namespace kvbench {
namespace {

namespace fs = std::filesystem;

kvlane::Status Errno(const std::string& what, int err) {
  return kvlane::Status::Backend(what + ": " + std::strerror(err));
}

// The part of a temporary file's name that names its writer (RemoveTemporaryFiles).
std::string WriterTag(int pid) { return ".tmp-" + std::to_string(pid) + "-"; }

// Whether `name` is ".<name>.tmp-<pid>-<n>" for this pid.
bool IsTemporaryOf(const std::string& name, int pid) {
  const std::string tag = WriterTag(pid);
  const size_t at = name.rfind(tag);
  if (name.size() < 2 || name[0] != '.' || at == std::string::npos || at < 2) return false;
  const std::string n = name.substr(at + tag.size());
  return !n.empty() && n.find_first_not_of("0123456789") == std::string::npos;
}

using RemovedOnStop = std::optional<kvlane_tools::RemoveOnLaterStop>;

// Opens a fresh ".<name>.tmp-<pid>-<n>" beside `path` (mode 0666 less the umask,
// like the file an ofstream would have made), named to `removed` before it is
// created: a second stop that kills this process at once removes it
// (common/stop_signal.h).
kvlane::Result<int> OpenTemporary(const fs::path& path, std::string* temp, RemovedOnStop* removed) {
  for (int n = 0; n < 100; ++n) {
    *temp = (path.parent_path() /
             ("." + path.filename().string() + WriterTag(getpid()) + std::to_string(n)))
                .string();
    removed->emplace(*temp);
    int fd = ::open(temp->c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0) return fd;
    const int err = errno;
    removed->reset();  // not this call's file
    if (err != EEXIST && err != EINTR) return Errno("cannot create " + *temp, err);
  }
  return kvlane::Status::Backend("cannot create a temporary file beside " + path.string());
}

// Writes `bytes` and syncs them: a crash after the rename finds them on disk.
kvlane::Status WriteAll(int fd, std::string_view bytes, const std::string& temp) {
  while (!bytes.empty()) {
    ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Errno("cannot write " + temp, errno);
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  if (::fsync(fd) != 0) return Errno("cannot write " + temp, errno);
  return kvlane::Status::Ok();
}

// Gives `temp` the name `path` without replacing a file of that name, the kernel
// answering in the same step whether there was one: renameat2(RENAME_NOREPLACE),
// or where the file system has no such rename (EINVAL, ENOSYS) link() + unlink().
// `rename_noreplace` is renameat2's stand-in (detail::RenameNoReplace).
// 0: moved; EEXIST: `path` exists and `temp` is untouched; else the error.
int MoveWithoutReplacing(const std::string& temp, const std::string& path,
                         detail::RenameNoReplace rename_noreplace) {
  if (rename_noreplace(temp.c_str(), path.c_str()) == 0) return 0;
  if (errno != EINVAL && errno != ENOSYS) return errno;
  if (::link(temp.c_str(), path.c_str()) != 0) return errno;
  ::unlink(temp.c_str());
  return 0;
}

// Moves `temp` to `path`; whether a file of that name was replaced.
kvlane::Result<bool> MoveIntoPlace(const std::string& temp, const std::string& path,
                                   detail::RenameNoReplace rename_noreplace) {
  const int err = MoveWithoutReplacing(temp, path, rename_noreplace);
  if (err == 0) return false;
  bool replaced = true;
  if (err != EEXIST) {  // no hard links either (EPERM, ENOTSUP): asked apart from the rename
    std::error_code ec;
    replaced = fs::exists(path, ec);
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    return Errno("cannot rename " + temp + " to " + path, errno);
  }
  return replaced;
}

// Syncs the directory holding `path` with `sync` (fsync), so that the rename
// survives a crash. A file system that cannot sync a directory (EINVAL) is not an error.
kvlane::Status SyncDirectory(const fs::path& path, detail::DirSync sync) {
  const fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Errno("cannot open " + dir.string() + " to sync it", errno);
  const int synced = sync(fd);
  const int err = errno;
  ::close(fd);
  if (synced != 0 && err != EINVAL) return Errno("cannot sync " + dir.string(), err);
  return kvlane::Status::Ok();
}

int RenameAt2NoReplace(const char* from, const char* to) {
  return ::renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE);
}

}  // namespace

int RemoveTemporaryFiles(const std::string& dir, int pid) {
  std::error_code ec;
  int removed = 0;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (!IsTemporaryOf(it->path().filename().string(), pid)) continue;
    std::error_code gone;
    if (fs::remove(it->path(), gone)) ++removed;
  }
  return removed;
}

kvlane::Result<WrittenFile> WriteFileAtomically(const std::string& path,
                                                std::string_view contents) {
  return detail::WriteFileAtomically(path, contents, RenameAt2NoReplace);
}

kvlane::Result<WrittenFile> detail::WriteFileAtomically(const std::string& path,
                                                        std::string_view contents,
                                                        RenameNoReplace rename_noreplace,
                                                        DirSync sync_directory) {
  std::string temp;
  RemovedOnStop removed;  // until the file is renamed or removed
  KVLANE_ASSIGN_OR_RETURN(int fd, OpenTemporary(fs::path(path), &temp, &removed));
  kvlane::Status s = WriteAll(fd, contents, temp);
  if (::close(fd) != 0 && s.ok()) s = Errno("cannot write " + temp, errno);
  auto replaced = s.ok() ? MoveIntoPlace(temp, path, rename_noreplace) : kvlane::Result<bool>(s);
  if (!replaced.ok()) {
    ::unlink(temp.c_str());
    return replaced.status();
  }
  KVLANE_RETURN_IF_ERROR(SyncDirectory(fs::path(path), sync_directory));
  return WrittenFile{path, replaced.value()};
}

}  // namespace kvbench
