// Writing a file whole or not at all: the bytes go to a temporary file in the
// target's directory, which is then renamed over the name (rename(2) replaces
// it in one step on one file system). A reader or a second run never sees half a
// file, and a write that fails leaves what was there before. Free functions;
// thread-safe (each call uses a temporary name of its own).
#pragma once

#include <string>
#include <string_view>

#include "kvlane/status.h"

namespace kvbench {

struct WrittenFile {
  std::string path;
  bool replaced = false;  // a file of that name existed and is now this one
};

// Writes `contents` to `path` atomically (see above); creates no directory.
// On failure the temporary file is removed and `path` is left as it was.
kvlane::Result<WrittenFile> WriteFileAtomically(const std::string& path, std::string_view contents);

}  // namespace kvbench
