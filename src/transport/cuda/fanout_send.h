// One message to many connections side by side (the cuda control server's
// revocations): every connection's send progresses as its peer reads, all by
// one deadline, so a peer that stops reading holds up no other connection's
// send and the whole fan-out costs one deadline however many connections
// there are (sending to each in turn would cost one per stalled peer).
#pragma once

#include <mutex>
#include <span>
#include <string_view>
#include <vector>

#include "transport/stream/fd_passing.h"

namespace kvlane::core {

// A connection to send to: its socket and the mutex that keeps one frame at a
// time on it (held by the connection's own replies).
struct FanoutTarget {
  int fd;
  std::mutex* write_mu;
};

// Sends all of `bytes` to every target by `by`: each target's write_mu is
// taken (try_lock, retried until `by`: its holder may be in a send of its
// own), then its bytes go out non-blocking whenever its socket takes them,
// and its mutex is released as soon as they all went (its own replies wait
// for no other target). Returns, per target, whether every byte went out. A
// target whose mutex was taken and that got only part of them (its peer
// stopped reading, the deadline passed, or the socket failed) is shut down
// (SHUT_RDWR) before its mutex is released, so that nothing follows the
// partial message on it; one whose mutex was never taken got nothing. Never
// waits past `by` (but for one poll of 1 ms while a mutex is busy).
std::vector<bool> FanoutSend(std::span<const FanoutTarget> to, std::string_view bytes, Deadline by);

}  // namespace kvlane::core
