#include "atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

namespace kvbench {
namespace {

namespace fs = std::filesystem;

kvlane::Status Errno(const std::string& what, int err) {
  return kvlane::Status::Backend(what + ": " + std::strerror(err));
}

// Opens a fresh ".<name>.tmp-<pid>-<n>" beside `path` (mode 0666 less the umask,
// like the file an ofstream would have made).
kvlane::Result<int> OpenTemporary(const fs::path& path, std::string* temp) {
  for (int n = 0; n < 100; ++n) {
    *temp = (path.parent_path() / ("." + path.filename().string() + ".tmp-" +
                                   std::to_string(getpid()) + "-" + std::to_string(n)))
                .string();
    int fd = ::open(temp->c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0) return fd;
    if (errno != EEXIST && errno != EINTR) return Errno("cannot create " + *temp, errno);
  }
  return kvlane::Status::Backend("cannot create a temporary file beside " + path.string());
}

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

}  // namespace

kvlane::Result<WrittenFile> WriteFileAtomically(const std::string& path,
                                                std::string_view contents) {
  std::string temp;
  KVLANE_ASSIGN_OR_RETURN(int fd, OpenTemporary(fs::path(path), &temp));
  kvlane::Status s = WriteAll(fd, contents, temp);
  if (::close(fd) != 0 && s.ok()) s = Errno("cannot write " + temp, errno);
  std::error_code ec;
  WrittenFile out{path, fs::exists(path, ec)};
  if (s.ok() && std::rename(temp.c_str(), path.c_str()) != 0) {
    s = Errno("cannot rename " + temp + " to " + path, errno);
  }
  if (!s.ok()) {
    ::unlink(temp.c_str());
    return s;
  }
  return out;
}

}  // namespace kvbench
