// AgentOptions: every knob of an agent in one struct that validates itself.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "kvlane/status.h"

namespace kvlane {

enum class ProgressPolicy : uint8_t {
  kIndependent = 0,  // each request completes when its own chunks retire (default)
  kGlobalFifo = 1,   // the old behaviour: completions published in global post order
};

const char* PolicyName(ProgressPolicy policy);
Result<ProgressPolicy> ParsePolicy(const std::string& name);

// tcp with device memory: how each window of device ranges is copied to or from
// its pinned host half (docs/DESIGN.md, "tcp with device memory"). Measured per
// 1 MiB window in docs/perf/2026-12-01-session12.md (cuda_copier_probe).
enum class StagingCopy : uint8_t {
  // Copy engines: a window's copies out of device memory, and those of at
  // least 32 KiB into it, as one cudaMemcpyBatchAsync; shorter copies into
  // device memory one cudaMemcpyAsync each (the driver inlines them, batched
  // or not). No SMs. One call per copy where the driver has no batch call.
  // The default: never slower than kEach in session 12's measurements.
  kBatch = 0,
  // Copy engines, one cudaMemcpyAsync per range (~2-3 us of CPU each).
  kEach = 1,
  // Ranges under 64 KiB by one copy kernel per window (highest stream priority),
  // longer ones by the copy engines. The fastest while SMs are free; it waits
  // for SMs the application's kernels hold, and for the time slices of other
  // processes on the GPU.
  kKernel = 2,
};
const char* StagingCopyName(StagingCopy copy);  // "batch" | "each" | "kernel"
Result<StagingCopy> ParseStagingCopy(const std::string& name);

struct AgentOptions {
  // Required: 1..255 bytes of plain text (UTF-8 without control or bidi
  // characters: peers refuse other names); unique among the agents of a job.
  std::string name;
  ProgressPolicy policy = ProgressPolicy::kIndependent;
  // Transports this agent may use, in preference order ("local", "shm", "tcp", "cuda"),
  // each at most once; another name, a repeat or an empty list is refused. One not built
  // into this library (cuda without CUDA) is left out; Create fails (kNotSupported)
  // when that leaves none, or when none left works on this host (cuda alone where
  // no CUDA device is visible: it would reach no peer). cuda beside others on such
  // a host stays idle and is not offered to peers.
  std::vector<std::string> transports = {"local", "shm", "tcp", "cuda"};
  std::string tcp_listen_host = "127.0.0.1";  // data listener bind address (no forced wildcard)
  uint16_t tcp_listen_port = 0;               // 0: ephemeral
  // Address to advertise for the tcp listener in metadata; empty = tcp_listen_host, or the
  // host name when listening on the wildcard address.
  std::string tcp_advertise_host;
  // "host:port" serves ExportMetadata() (the blob, secret included: docs/SECURITY.md);
  // empty = off. The host is required: 0.0.0.0 for every interface, said as such.
  std::string metadata_listen;
  int lanes_per_peer = 2;                     // data lanes per peer connection, 1..64
  uint64_t chunk_bytes = 2ull << 20;          // largest chunk a lane moves at once; 4 KiB..1 GiB
  uint32_t max_segments_per_chunk = 256;      // segments gathered into one chunk; 1..1024
  // Consecutive descriptor pairs that continue each other on both sides, inside
  // the same registered pieces, move as one segment (up to the request's chunk
  // size: chunk_bytes, or less for a striped request): one copy for a run of
  // adjacent pages instead of one per page. false keeps one segment per
  // descriptor (per piece it crosses); benchmarks use it to compare.
  bool merge_adjacent = true;
  uint64_t stripe_min_bytes = 1ull << 20;     // requests at least this big are striped
  uint32_t lane_ring_slots = 1u << 16;        // chunk slots per lane (a power of two, 2..16M)
  // Transfer handles alive at once (MakeTransfer past it: kNotAllowed); 1..2^24.
  uint32_t max_requests = 1u << 14;
  // Regions are registered in pieces of at most this. 4 KiB..256 TiB (2^48, past
  // what a 4-level-paging x86-64 process can map: a larger region just takes more
  // pieces), default 4 GiB.
  uint64_t piece_bytes = 4ull << 30;
  static constexpr uint64_t kMaxPieceBytes = 1ull << 48;
  // The three timeouts below are 1 ms..24 h (kMaxTimeout): the engine adds them to
  // clocks, to each other and doubles them, and waits them in poll's int
  // milliseconds, none of which overflows within that bound.
  static constexpr std::chrono::hours kMaxTimeout{24};
  std::chrono::milliseconds post_timeout{30000};     // Post waits this long for ring space
  std::chrono::milliseconds connect_timeout{5000};   // connecting to a peer
  // A lane with work but no progress for this long fails. A target serves a
  // frame within it of the frame's first byte (2x at most, however the peer
  // paces its bytes: docs/SECURITY.md), so one chunk must cross the link in it.
  std::chrono::milliseconds io_timeout{10000};
  // tcp (data connections on both sides): TCP keepalive after this long without
  // a segment from the peer, then 3 probes max(1 s, tcp_keepalive / 3) apart,
  // and a user timeout (TCP_USER_TIMEOUT) of the last probe's deadline but at
  // least 2 x io_timeout + 1 s, which also ends data left unacknowledged that
  // long. So a connection whose peer's host vanished (power loss: no FIN or RST)
  // ends max(tcp_keepalive + 3 x max(1 s, tcp_keepalive / 3), 2 x io_timeout + 1 s)
  // after the peer last answered (whole seconds: 7 s gives max(7 + 3 x 2, 21) = 21 s
  // with the default io_timeout), idle or not: the target frees its thread and
  // descriptor; the initiator's lane fails (kRemoteDisconnect), and so do later
  // posts to that peer. A live peer that stops reading still fails by io_timeout
  // (kTimeout).
  // 0: off (an idle connection to a vanished host lives until the agent stops).
  // 0..32767 s (the kernel's limit), default 30 s (dropped after 60 s). shm and
  // cuda use unix sockets, which need none.
  std::chrono::seconds tcp_keepalive{30};
  // Bounded spinning before a worker sleeps; a tcp/shm lane's receiver also spins
  // this long on its socket for the reply to a frame a posting thread sent.
  // 0..1 s (kMaxSpin), default 50 us.
  std::chrono::microseconds spin{50};
  static constexpr std::chrono::seconds kMaxSpin{1};
  // tcp, shm: a post whose frame (header, segment table and, for a tcp WRITE from
  // host memory, the payload) is at most this many bytes, on a lane whose earlier
  // frames have all been answered, is sent by the posting thread inside Post: no
  // wake-up of the lane's sender thread (Post takes the sendmsg's few microseconds
  // instead), and the lane's receiver is woken at once to spin for the reply. The
  // send never waits for socket space before its first byte (a full socket leaves
  // the frame to the lane's thread); once started, it finishes as the peer reads,
  // and a peer that stops reading for io_timeout fails the channel (kTimeout)
  // rather than hold Post. 0: lane threads send every frame. 0..1 MiB, default 16 KiB.
  uint64_t post_inline_bytes = 16ull << 10;
  // CPUs the agent's own threads run on (lane, server and listener threads, and
  // the threads they start); empty: wherever the creating thread may run.
  // Keeping them off the CPU of the thread that posts and polls stops the
  // scheduler from putting a spinning lane thread beside it (a woken thread
  // often lands on its waker's CPU). The kernel must let this process run on
  // each of them (checked at Create, which names any it refuses: kInvalidArgument;
  // the calling thread's own mask does not matter); 0..1023, no repeats.
  std::vector<int> worker_cpus;
  // Notifications received and not yet taken (TakeNotifications) may hold at most
  // this many bytes (payload + sender name + 72 each, and sender name + 128 once per
  // name with notifications held; a payload or name over 15 bytes counts as its
  // heap block: its length + 1 rounded up to 16, plus 16); beyond it a peer's
  // notification is refused and its sender sees kNotAllowed. 4 KiB..16 GiB.
  uint64_t max_notification_bytes = 64ull << 20;
  // The share of max_notification_bytes one peer may hold: past it that peer's
  // notifications are refused (kNotAllowed) while other peers' still fit, until the
  // application takes them. A peer is the name its handshake announced, which any
  // holder of this agent's metadata may choose (docs/SECURITY.md). 0 (default): a
  // quarter of max_notification_bytes, but at least what the largest notification
  // costs (66,295 bytes: a 64 KiB payload, 65,568 as a heap block, from a 255-byte
  // name, 272, + 72, + 255 + 128 as its name's first) or all of it; else
  // 202..max_notification_bytes (a notification without payload from a 1-byte name).
  uint64_t max_notification_bytes_per_peer = 0;
  // Connections one peer (by the name its handshake announced) may hold at once on
  // this agent, its tcp, shm and cuda control servers counted together; more are
  // refused after the handshake (the initiator's connect fails with kNotAllowed
  // naming this limit). A peer's stream channel holds
  // lanes_per_peer (its own: 1..64) + 1 connections, so the default 256 leaves room for
  // a few of a peer's channels at the largest lanes_per_peer (e.g. a restarted peer's,
  // while its old connections are still open), on all transports together. 1..4096.
  uint32_t max_conns_per_peer = 256;
  // tcp: how device memory is staged through pinned host buffers (StagingCopy).
  StagingCopy staging_copy = StagingCopy::kBatch;
  // cuda: blocks (one SM each) of every cuda lane's resident proxy kernel, which moves
  // small transfers without a launch per request; 0..8, 0 turns it off. Default 1 (with
  // lanes_per_peer 2: two SMs, only while small transfers flow; it exits when idle).
  int cuda_proxy_blocks = 1;
  // cuda: requests of at most this many bytes go through the proxy; bigger ones use
  // copy engines or a copy kernel launch. 0..16 MiB, default 64 KiB.
  uint64_t cuda_proxy_max_bytes = 64ull << 10;
  // cuda: a lane's proxy kernel exits after this long without a small transfer; the
  // next small transfer starts it again (one kernel launch, ~10 us, and behind bulk
  // copy-engine work possibly much more). While it runs, the lane's issue and retire
  // threads spin (two CPU cores per lane) and it holds one SM per proxy block.
  // 0..1 s, default 10 ms.
  std::chrono::microseconds cuda_proxy_idle_exit{10000};
  // cuda: a running proxy is replaced by a fresh launch this often: the successor
  // takes over the ring on the GPU, no request waits. A kernel also leaves on its own
  // after twice this (at least 1 ms; without renewal twice cuda_proxy_idle_exit) and
  // is relaunched at once. So a caller's cudaDeviceSynchronize waits about this long
  // for the proxy, and a cudaFree or cudaFreeHost, which holds back every launch
  // (the successor's too) until the running kernels return, at most twice this;
  // small transfers wait meanwhile. 0 turns renewal off: then such calls wait until
  // small traffic has stopped for cuda_proxy_idle_exit, or for the kernel to leave.
  // 0 or 100 us..1 s, default 1 ms.
  std::chrono::microseconds cuda_proxy_renew_every{1000};

  // Returns an InvalidArgument status naming the first bad field.
  Status Validate() const;
};

}  // namespace kvlane
