// Passing a file descriptor over a connected unix socket (SCM_RIGHTS), riding
// on the bytes of one message. Both calls retry EINTR.
#pragma once

#include <cstddef>

#include "transport/stream/socket.h"

namespace kvlane::core {

// Sends all `len` bytes with `fd` attached to the first of them (fd < 0: none).
// The caller keeps its own `fd` (the kernel duplicates it into the receiver).
Status SendWithFd(int sock, const void* buf, size_t len, int fd);

// Receives exactly `len` bytes; a descriptor that rides on them lands in `*fd`
// (close-on-exec). Extra descriptors are closed; truncated control data fails.
Status RecvWithFd(int sock, void* buf, size_t len, Fd* fd);

}  // namespace kvlane::core
