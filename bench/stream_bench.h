// kvlane_stream_bench: host-transport throughput against plain references
// measured in the same run, between the same two processes. See
// docs/perf/2026-11-30-host-transports.md for what each number means.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace kvlane::bench {

// Plain-socket reference operations the target process serves.
// kSinkOpen: like kSink, but the client sends until it closes the connection.
enum class RefOp : uint32_t { kSink = 1, kSource = 2, kEcho = 3, kSinkOpen = 4 };

// Sent by the initiator on a fresh reference connection; the target answers one
// byte once its `footprint` buffer is ready, and the initiator starts its clock after it.
struct RefRequest {
  RefOp op;
  uint32_t msg_bytes;    // bytes per message (2 MiB bulk, 4 KiB echo)
  uint64_t total_bytes;  // sink/source: bytes to move; echo: messages * msg_bytes
  uint64_t footprint;    // bytes of memory cycled through on each side
};
inline constexpr uint32_t kEchoReplyBytes = 24;  // same size as a kvlane reply header

// The target side: runs in the forked child. Creates the kvlane target agent and
// the reference listener, writes [u32 len][metadata][u16 ref port] to `out_fd`,
// then serves until `in_fd` reaches EOF. Returns the exit code.
int RunTarget(int in_fd, int out_fd, uint64_t bytes, int spin_us);

// The reference clients (initiator side). Each returns seconds elapsed.
double RefSink(uint16_t port, uint64_t total, uint32_t msg, uint8_t* buf, uint64_t footprint);
double RefSource(uint16_t port, uint64_t total, uint32_t msg, uint8_t* buf, uint64_t footprint);
double RefEcho(uint16_t port, uint64_t count, uint32_t msg, int window, uint8_t* buf, uint64_t footprint);
// One 4 KiB-class echo at a time, `gap_us` apart (lanes idle between them):
// each round trip's microseconds, measured by this side.
std::vector<double> RefEchoLatency(uint16_t port, uint64_t count, uint32_t msg, int gap_us,
                                   uint8_t* buf);
// Sends `msg`-byte messages until `stop` is set, then closes; returns bytes
// per second over that time (the bulk stream the "beside" rows run next to).
double RefSinkUntil(uint16_t port, uint32_t msg, uint8_t* buf, uint64_t footprint,
                    const std::atomic<bool>& stop);
// Like RefEchoLatency, but each echo starts just after waking a thread that
// then sends one `bulk`-byte message on a connection of its own (the lanebench
// mixed shape: a bulk transfer posted, then a small one); the next round starts
// once the target has all of the bulk message (its reply came, as a kvlane
// WRITE completes) and `gap_us` passed.
std::vector<double> RefEchoAfterBulk(uint16_t port, uint64_t count, uint32_t msg, int gap_us,
                                     uint8_t* buf, uint32_t bulk);
double RefMemcpy(uint8_t* dst, const uint8_t* src, uint64_t total, uint32_t msg, uint64_t footprint);

}  // namespace kvlane::bench
