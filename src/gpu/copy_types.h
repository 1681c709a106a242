// Plain structs shared by host code and the copy kernels. POD only; every
// pointer-sized field says on which side its memory lives.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define KVLANE_HOST_DEVICE __host__ __device__
#else
#define KVLANE_HOST_DEVICE
#endif

namespace kvlane::gpu {

// One contiguous copy of a prepared transfer, already resolved to addresses the
// executing GPU can dereference (its own memory, a peer GPU's memory opened
// through IPC or peer access, or pinned host memory).
struct CopySeg {
  uint64_t src;  // device-accessible address (local GPU, peer GPU or pinned host)
  uint64_t dst;  // device-accessible address (local GPU, peer GPU or pinned host)
  uint64_t len;  // bytes, > 0
};

// Completion of one launch: the last block to finish stores `value` into `*done`
// after a system-scope fence, so a host thread polling `done` sees the data.
struct CopyDone {
  uint32_t* blocks_finished;  // device memory, one word per stream; 0 between launches
  uint64_t* done;             // pinned host memory (mapped); written by the GPU
  uint64_t value;             // what the host waits for
  // Optional (nullptr: none): the request's terminal record (mapped host memory),
  // which gets `record_value` when `done` gets `value`, behind the same fence;
  // the two may land in either order (the host waits for both).
  uint64_t* record;
  uint64_t record_value;
};

// ---- Resident proxy (one kernel per lane, polling a ring in pinned host memory).

inline constexpr uint32_t kProxyRing = 1024;  // ring entries = the lane's completion words
inline constexpr uint32_t kProxyMaxSegs = 16;  // segments of one entry (more: the launch path)
inline constexpr uint32_t kProxyCopy = 1;     // ProxyEntry::op: copy the segments
inline constexpr uint32_t kProxyExit = 2;     // ProxyEntry::op: the kernel returns
// ProxyEntry::op: copy the segments, every destination of which is memory of
// the proxy's own GPU (a READ into it, or a WRITE to a peer sharing it): a
// device-scope fence orders the copy before the record, as in the copy
// kernel's blocks (BlockFence::kDevice).
inline constexpr uint32_t kProxyCopyLocal = 3;
// Or'ed into a completion word when the proxy acknowledged an entry without
// copying (CPU latch mirrored to it, or its own GPU-side error).
inline constexpr uint64_t kDoneSkipped = 1ull << 62;

// One ring entry, one 64-byte cache line so that the proxy reads it with one
// PCIe read. Pinned host memory: written by the lane's issue thread (`ready`
// last), read by the proxy. `check` detects a torn read (the proxy then re-reads).
struct alignas(64) ProxyEntry {
  uint64_t ready;   // entry number + 1 once the fields below are written
  uint16_t op;      // kProxyCopy, kProxyCopyLocal or kProxyExit
  uint16_t nsegs;   // segments: `seg` when 1, else the list at `segs`
  uint32_t check;   // ProxyCheck() of the other fields
  uint64_t segs;    // pinned host (mapped): the entry's CopySeg list (used when nsegs > 1)
  CopySeg seg;      // the segment itself when nsegs == 1
  uint64_t value;   // stored into done[(value - 1) % kProxyRing] when finished
  uint32_t record;  // 1 + the slot whose terminal record the proxy writes too (0: none)
  uint32_t gen;     // the generation that record gets (status ok)
};
static_assert(sizeof(ProxyEntry) == 64, "one cache line");

// ProxyEntry::check is the XOR of one term per 8-byte word of the entry
// (word 1 without the check itself) and kProxyCheckSeed, so that the proxy,
// which holds word i in lane i of a warp, checks it with one reduction.
inline constexpr uint32_t kProxyCheckSeed = 0x5bd1e995u;
KVLANE_HOST_DEVICE inline uint32_t ProxyCheckTerm(uint64_t word, uint32_t i) {
  if (i == 1) word &= 0xffffffffull;  // op and nsegs
  // An odd factor per word.
  const uint64_t x = word * (0x9e3779b97f4a7c15ull ^ uint64_t{i} << 40);
  return static_cast<uint32_t>(x >> 32) ^ static_cast<uint32_t>(x);
}
KVLANE_HOST_DEVICE inline uint32_t ProxyCheck(const ProxyEntry& e) {
  uint64_t words[8];
  std::memcpy(words, &e, sizeof(words));
  uint32_t c = kProxyCheckSeed;
  for (uint32_t i = 0; i < 8; ++i) c ^= ProxyCheckTerm(words[i], i);
  return c;
}

// Records of request slots, as the GPU addresses them: slot i's at
// base + i * kRecordStride bytes (core::RecordTable).
inline constexpr uint64_t kRecordStride = 64;

// A word tagged with the low 16 bits of a proxy launch's generation that
// carries a count (47 bits) and a flag, written and read at once. Three uses:
// the hand-off record (ProxyCtl::handoff and ProxyChain::handoff: the first entry the launch did
// not consume; flag: it stopped at an exit entry, so the whole chain ends and a successor waiting
// for the record exits too), and in the scratch what several blocks agreed on and where block 0
// found the launch is to start.
KVLANE_HOST_DEVICE inline uint64_t PackTagged(uint64_t gen, uint64_t count, bool flag) {
  return (gen & 0xffffull) << 48 | (count & ((1ull << 47) - 1)) << 1 | (flag ? 1ull : 0ull);
}
KVLANE_HOST_DEVICE inline uint32_t TaggedGen16(uint64_t w) { return static_cast<uint32_t>(w >> 48); }
KVLANE_HOST_DEVICE inline uint64_t TaggedCount(uint64_t w) { return (w >> 1) & ((1ull << 47) - 1); }
KVLANE_HOST_DEVICE inline bool TaggedFlag(uint64_t w) { return (w & 1) != 0; }

// A single-block proxy launch whose successor is alive waits up to `wait_ns`
// for its next entry before it stops at a poll that found none (see Poll in
// proxy_kernel.cu). `*since` is 0 until the launch first saw the successor at
// global-timer time `now`; then it holds now | 1 (never 0), so it may be one
// past a later reading of the coarse clock: the difference is signed.
// Returns whether the wait is over.
KVLANE_HOST_DEVICE inline bool HandOverWaitOver(uint64_t now, uint64_t* since, int64_t wait_ns) {
  if (*since == 0) {
    *since = now | 1;
    return false;
  }
  return static_cast<int64_t>(now - *since) > wait_ns;
}

// Flags shared by the host and one lane's proxy; pinned host memory (mapped).
// The proxy is a chain of launches, generation 1, 2, ... (two streams taking
// turns): launch g waits for the hand-off record of launch g - 1, serves the
// ring from the entry it names, and writes its own record when it stops. It
// stops at an exit entry; once launch g + 1 has reported alive (renewal), after
// the next entry it serves or at a poll that found none (see Poll in
// proxy_kernel.cu); or on its own after ProxyArgs::max_life_ns, so that it never
// waits for the host: a caller's cudaFree holds back every launch, the
// successor's included, until the running kernels return.
struct ProxyCtl {
  // Read by the proxy with one load, at every 16th poll of the ring (and a
  // launch's first): keep these four together. An error flag needs to be seen
  // once only (the proxy's view of it is sticky).
  uint32_t cpu_latched;   // host -> GPU: the channel latched an error; copy nothing more
  uint32_t inject_fault;  // host -> GPU (tests): raise a GPU-side error now
  uint32_t unused_alive;  // (the successor's alive report lives in ProxyChain, device memory)
  uint32_t gpu_error;     // GPU -> host, later launches: nonzero once the proxy raised an error
  uint32_t saw_latch;     // GPU -> host: the proxy has seen cpu_latched
  uint32_t unused;
  // PackTagged() record of the launch that stopped last, for the host (the
  // successor reads ProxyChain::handoff, a device-memory copy). Stored with
  // no fence: it orders nothing (a completion word or record of an entry before
  // it may land later); the host reads only its generation tag.
  uint64_t handoff;
};

// Device-memory scratch of one proxy stream (its launches run one after the
// other); zeroed once when allocated, never reset by the host (a memset may
// queue behind bulk copy-engine work): each launch leaves it ready for the next.
struct ProxyScratch {
  unsigned int arrivals[kProxyRing];  // blocks done with ring entry i; the last one resets it
  unsigned int skipped;               // sticky: some block stopped copying (the channel latched)
  // With several blocks (see proxy_kernel.cu), PackTagged() words: what they
  // agreed on for the entry at hand, and where block 0 found the launch is to start.
  unsigned long long decided;
  unsigned long long start;
};

// Device memory, one for a lane's whole chain of launches (zeroed once).
// Both words are read from L2, never over PCIe.
struct ProxyChain {
  // The hand-off record again (PackTagged, see ProxyCtl::handoff), which the
  // successor polls (a renewal's gap was ~3 us over PCIe, session 8).
  unsigned long long handoff;
  // The newest launch that started (low 32 bits of its generation), which the
  // serving launch reads at every poll, beside the ring's PCIe read and done
  // before it.
  uint32_t alive_gen;
  uint32_t unused;
};

struct ProxyArgs {
  const ProxyEntry* ring;  // pinned host (mapped): kProxyRing entries
  ProxyCtl* ctl;           // pinned host (mapped)
  uint64_t* done;          // pinned host (mapped): the lane's kProxyRing completion words
  ProxyScratch* scratch;   // device memory, this stream's
  uint64_t gen;            // this launch's generation (>= 1)
  uint64_t max_life_ns;    // stop on its own after this long (0: only when told)
  uint8_t* records;        // mapped host: the request slots' records (nullptr: none)
  uint32_t record_slots;   // how many; ProxyEntry::record beyond it is ignored
  ProxyChain* chain;       // device memory, the lane's
  // A chain's first launch, which no launch hands over to: the record it
  // starts from, given by the host (start_given != 0). Else the launch waits
  // for generation gen - 1's record in chain->handoff.
  uint64_t start;
  uint32_t start_given;
};

}  // namespace kvlane::gpu
