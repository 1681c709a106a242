// Socket I/O each call bounded by a deadline (the peer is untrusted: it may stop
// reading or stall mid-frame), with, on unix sockets, a file descriptor riding
// on the bytes of a message (SCM_RIGHTS): the cuda control path, and every
// connection's handshake (handshake.h). The calls wait with
// poll and move bytes with MSG_DONTWAIT, so the socket's own timeouts do not
// matter; all of them retry EINTR.
#pragma once

#include <sys/uio.h>

#include <chrono>
#include <cstddef>

#include "transport/stream/socket.h"

namespace kvlane::core {

// Waits until `events` (POLLIN, POLLOUT) are ready on `sock`, or it hung up.
// kTimeout once `deadline` has passed.
Status WaitFor(int sock, short events, Deadline deadline);

// Sends every byte of iov[0..n) by `deadline`, with `fd` attached to the first
// of them (fd < 0: none); may modify iov. The caller keeps its own `fd` (the
// kernel duplicates it into the receiver). kTimeout at the deadline: then part
// of the message may have gone out, and the connection is of no further use.
Status SendIovBy(int sock, iovec* iov, int n, int fd, Deadline deadline);
Status SendWithFd(int sock, const void* buf, size_t len, int fd, Deadline deadline);

// Receives exactly `len` bytes by `deadline`; a descriptor that rides on them
// lands in `*fd` (close-on-exec) if it is still empty. Extra descriptors, and
// every one when `fd` is null, are closed; truncated control data fails.
Status RecvWithFd(int sock, void* buf, size_t len, Fd* fd, Deadline deadline);

// Takes what a peer left queued on a unix connection about to close, without
// waiting: bytes dropped, descriptors closed as unwanted ones are (a socket
// abortively). Closing the connection would release them on the closing
// thread, and a descriptor whose close blocks (a socket made to linger with
// unsent data) would hold it. Call after shutdown(SHUT_RDWR), which stops the
// peer sending more. At most kDrainMessages messages. Descriptors nested in a
// passed unix socket are out of reach: the listeners refuse passed
// descriptors where the kernel can (ListenUnix), which leaves nothing to drain.
inline constexpr int kDrainMessages = 1024;
void DrainQueued(int sock);

}  // namespace kvlane::core
