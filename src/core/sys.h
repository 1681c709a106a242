// Wrappers that turn POSIX failures into Status with a breadcrumb.
#pragma once

#include <cerrno>
#include <cstring>
#include <string>

#include "kvlane/status.h"

namespace kvlane::core {

// "what: strerror(errno) (errno N)" as a Backend status.
inline Status ErrnoStatus(const char* what, int err) {
  return Status::Backend(std::string(what) + ": " + std::strerror(err) + " (errno " +
                         std::to_string(err) + ")");
}

}  // namespace kvlane::core

// Evaluates a POSIX call returning -1 on error, retrying EINTR. Leaves the
// result in `out` (declared by the caller).
#define KVLANE_SYSCALL_RETRY(out, call) \
  do {                                  \
    (out) = (call);                     \
  } while ((out) == -1 && errno == EINTR)

// Runs a POSIX call (EINTR retried) and returns a Backend status on -1.
#define KVLANE_POSIX(call)                                                      \
  do {                                                                          \
    long kvlane_rc_;                                                            \
    KVLANE_SYSCALL_RETRY(kvlane_rc_, (call));                                   \
    if (kvlane_rc_ == -1) return ::kvlane::core::ErrnoStatus(#call, errno);     \
  } while (0)
