// The resident proxy of a cuda lane: a persistent kernel (a few blocks) that
// polls the lane's ring of entries in pinned host memory, copies each entry's
// segments with 16-byte vectors and stores its completion word into pinned host
// memory after a fence (system scope; device scope for kProxyCopyLocal). It stops copying (but
// still acknowledges entries, marked skipped) once the host latched an error or it raised one
// itself. It returns on an exit entry, when its successor reports alive, or after max_life_ns, and
// then writes the hand-off record its successor starts from (see ProxyCtl). No launch per request:
// small transfers cost one PCIe poll, the copy and one PCIe store.
#include <cuda_runtime.h>

#include <cstddef>

#include "gpu/copy_device.cuh"
#include "gpu/copy_launch.h"

// Probe hook: cuda_proxy_phase_probe (tests/gpu/proxy_phase_probe.cu) includes
// this file with it defined, to time the phases of an entry. Nothing here.
#ifndef KVLANE_PROXY_MARK
#define KVLANE_PROXY_MARK(phase)
#endif
// Probe hook: 0 never reads the control flags in host memory (the probe
// variant cuda_proxy_phase_probe_noctl). The engine reads them (1).
#ifndef KVLANE_PROXY_POLL_CTL
#define KVLANE_PROXY_POLL_CTL 1
#endif

namespace kvlane::gpu {
namespace {

enum Cmd : int { kCmdCopy = 0, kCmdSkip = 1, kCmdExit = 2, kCmdStop = 3 };
constexpr int kProxyUnroll = 8;  // see kProxyThreads
// A single-block launch that sees its successor alive hands over right after
// its next entry (see Poll), or at a poll that finds none once this long has
// passed since it first saw the successor (the lane is idle).
constexpr int64_t kHandOverWaitNs = 20000;
constexpr uint32_t kErrInjected = 1, kErrBadEntry = 2;

__device__ __forceinline__ void StoreSys32(uint32_t* p, uint32_t v) {
  __threadfence_system();
  *reinterpret_cast<volatile uint32_t*>(p) = v;
}
__device__ __forceinline__ uint64_t GlobalTimer() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// The single-block hand-over (see Poll), for lane 0 of warp 0 of a launch
// whose successor is alive and that is not past its life: with an entry here,
// marks it the launch's last (*last) and returns false (serve it); with none,
// returns whether to stop now: once kHandOverWaitNs passed since the launch
// first saw the successor (HandOverWaitOver; `since`: 0 before).
__device__ __forceinline__ bool HandOverNow(bool here, uint64_t* since, int* last) {
  if (here) {
    *last = 1;
    return false;
  }
  return HandOverWaitOver(GlobalTimer(), since, kHandOverWaitNs);
}

__device__ __forceinline__ bool ValidFields(uint32_t op, uint32_t nsegs, uint64_t segs,
                                            uint64_t len) {
  if (op == kProxyExit) return true;
  if ((op != kProxyCopy && op != kProxyCopyLocal) || nsegs == 0) return false;
  return nsegs == 1 ? len > 0 : segs != 0 && nsegs <= kProxyMaxSegs;
}

// Word i of a ring entry, as lane i of warp 0 reads it (see Poll); the
// control flags, as lanes 8-11 read them (lane 10: ProxyChain::alive_gen).
constexpr unsigned kWordOpNsegs = 1, kWordSegs = 2, kWordLen = 5;
static_assert(offsetof(ProxyEntry, op) == 8 * kWordOpNsegs &&
              offsetof(ProxyEntry, nsegs) == 8 * kWordOpNsegs + 2 &&
              offsetof(ProxyEntry, check) == 8 * kWordOpNsegs + 4 &&
              offsetof(ProxyEntry, segs) == 8 * kWordSegs &&
              offsetof(ProxyEntry, seg) + offsetof(CopySeg, len) == 8 * kWordLen &&
              offsetof(ProxyEntry, ready) == 0);
static_assert(offsetof(ProxyCtl, cpu_latched) == 0 && offsetof(ProxyCtl, inject_fault) == 4 &&
              offsetof(ProxyCtl, gpu_error) == 12);
// The host's flags are read at every kCtlEvery-th poll (and a launch's
// first): an error needs to be seen once, and a poll that waits for a second
// PCIe read (beside the entry's) is slower (~0.1 us per poll, ~0.2 us per 4 KiB
// entry without it on two GPUs, session 9's cuda_proxy_phase_probe_noctl).
// The successor's alive report is read at every poll, from L2.
constexpr uint32_t kCtlEvery = 16;

// The XOR of `v` over the warp, in every lane.
__device__ __forceinline__ uint32_t WarpXor(uint32_t v) {
#if __CUDA_ARCH__ >= 800
  return __reduce_xor_sync(0xffffffffu, v);
#else
  for (int offset = 16; offset > 0; offset >>= 1) v ^= __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
#endif
}

// This lane's part of the entry's check (copy_types.h): the XOR over lanes
// 0-7 is kProxyCheckSeed when the eight words were read whole.
__device__ __forceinline__ uint32_t CheckPart(uint64_t w, unsigned lane) {
  if (lane >= 8) return 0;
  const uint32_t t = ProxyCheckTerm(w, lane);
  return lane == kWordOpNsegs ? t ^ static_cast<uint32_t>(w >> 32) : t;
}

// Several blocks poll the ring each on its own, so they agree on every entry
// through ProxyScratch::decided: the first block to decide entry n (serve it,
// or stop the launch before it) records that, the others follow. The word is
// PackTagged(generation, entries of this launch decided, stop); a word of
// another generation is what an earlier launch on this stream left.
struct Agreed {
  int cmd_stop;  // 1: stop before entry n
  int decider;   // 1: this block recorded the decision (it writes the hand-off)
};

// Lane 0 of warp 0, at the k-th entry of this launch. Returns -1 when the
// entry is not decided yet and this block cannot decide it (not ready, no
// reason to stop): poll again. Blocks may be entries apart (a block does not
// wait for the others after its part of an entry), so "served" is a count.
__device__ int Agree(const ProxyArgs& a, uint64_t k, bool ready, bool want_stop, Agreed* out) {
  if (gridDim.x == 1) {
    if (!want_stop && !ready) return -1;
    *out = {want_stop ? 1 : 0, 1};
    return 0;
  }
  unsigned long long* word = &a.scratch->decided;
  for (;;) {
    const unsigned long long d = atomicAdd(word, 0ull);
    const bool mine = TaggedGen16(d) == (a.gen & 0xffff);  // else: an earlier launch's, nothing decided yet
    const uint64_t served = mine ? TaggedCount(d) : 0;
    if (served > k) {  // another block saw it ready: it is, or soon will be, here too
      if (!ready) return -1;
      *out = {0, 0};
      return 0;
    }
    if (mine && TaggedFlag(d)) {  // the launch stops here
      *out = {1, 0};
      return 0;
    }
    if (!want_stop && !ready) return -1;
    const unsigned long long want = PackTagged(a.gen, want_stop ? k : k + 1, want_stop);
    if (atomicCAS(word, d, want) == d) {
      *out = {want_stop ? 1 : 0, 1};
      return 0;
    }
  }
}

// Warp 0, once the entry is decided (`c`; its nsegs and segs given): stages a
// segment list and hands the command to the block (whose barrier also makes
// the entry, stored into shared memory by lanes 0-7, visible).
__device__ void Decided(uint32_t nsegs, uint64_t segs, CopySeg* staged, int c, int* cmd) {
  const unsigned lane = threadIdx.x;
  if (c == kCmdCopy && nsegs > 1) {
    // The list was written before `ready`: the fence makes the relaxed read of
    // `ready` (lane 0's) an acquire, and the barrier extends it to every lane's
    // reads below (an acquire is per thread).
    __threadfence_system();
    __syncwarp();
    const uint32_t words = nsegs * 3u;
    const auto* list = reinterpret_cast<const uint64_t*>(segs);
    for (uint32_t i = lane; i < words; i += 32)
      reinterpret_cast<uint64_t*>(staged)[i] = LoadSys64(list + i);
    __syncwarp();
  }
  if (lane == 0) *cmd = c;
  KVLANE_PROXY_MARK(1);
}

// Warp 0: waits for entry `n` (the k-th of this launch), copying it into shared
// memory with one 64-byte read per poll (lanes 0-7, word i in lane i) while
// lane 10 reads the successor's alive report (L2) and, at every kCtlEvery-th
// poll, lanes 8, 9 and 11 the host's flags. Raises the GPU-side
// error and mirrors the host latch. Sets *cmd and *decider, and *last when the
// launch stops right after serving this entry.
//
// When it stops for an alive successor: at once when the launch is past its
// life. Else, with one block, right after the next entry it serves (*last):
// the successor, already polling its hand-off record in L2, then starts
// polling the ring while the host is still reading the entry's record and
// making its next request. Stopping at a poll that found no entry instead
// (what several blocks still do, and one block once kHandOverWaitNs passed
// since it saw the successor, the lane idle) makes a request that lands
// meanwhile wait for the successor's first PCIe round trip. Of 20,000 4 KiB
// requests beside ~107 renewals, 33-72 were over 5 us within 20 us of a
// renewal's launch with that rule, 5-18 with this one (session 9's
// cuda_renewal_probe).
// `successor_since`: see HandOverNow.
//
// A single-block launch with no flag set but the successor's, and its clock
// not due (nearly every poll), decides from registers: two votes and one
// reduction (ready, flags, check), and three shuffles for the fields
// ValidFields needs. The general path
// below it took ~450 ns from the poll's data to the decision (a lone warp runs
// each dependent instruction at its latency; session 8's cuda_proxy_phase_probe).
__device__ void Poll(const ProxyArgs& a, uint64_t n, uint64_t k, uint64_t born, uint32_t* tick,
                     ProxyEntry* e, CopySeg* staged, int* cmd, int* decider, int* last,
                     uint64_t* successor_since, uint32_t* failed, uint32_t* saw) {
  constexpr unsigned kAll = 0xffffffffu;
  const unsigned lane = threadIdx.x;
  const auto* src = reinterpret_cast<const uint64_t*>(&a.ring[n % kProxyRing]);
  auto* words = reinterpret_cast<uint64_t*>(e);
  const auto gen32 = static_cast<uint32_t>(a.gen);
  KVLANE_PROXY_MARK(7);
  for (;;) {
    uint64_t w = 0;
    uint32_t f = 0;
    // Every lane counts polls alike (lane 0's count is the one used).
    const bool ctl_poll = (*tick)++ % kCtlEvery == 0;
    if (lane < 8) w = LoadSys64(src + lane);
    else if (lane == 10)
      f = LoadGpu32(&a.chain->alive_gen);
    else if (KVLANE_PROXY_POLL_CTL && ctl_poll && lane < 12)
      f = LoadSys32(reinterpret_cast<const uint32_t*>(a.ctl) + (lane - 8));
    // The clock of the launch's life is read at the same polls.
    const bool due = a.max_life_ns != 0 && ctl_poll;
    // Lanes 8-11: cpu_latched, inject_fault, alive_gen (a successor: newer,
    // modulo 2^32), gpu_error.
    const bool flag =
        lane >= 8 && lane < 12 && (lane == 10 ? static_cast<int32_t>(f - gen32) > 0 : f != 0);
    const unsigned flags = __ballot_sync(kAll, flag);
    const bool successor = (flags & 1u << 10) != 0;
    const bool flagged = (flags & ~(1u << 10)) != 0;  // an error flag, or the host's latch
    const bool here = __ballot_sync(kAll, lane == 0 && w == n + 1) != 0 &&
                      WarpXor(CheckPart(w, lane)) == kProxyCheckSeed;
    KVLANE_PROXY_MARK(0);
    // The fast path also takes a successor (the hand-over, see above): the
    // entry served meanwhile is not slowed down.
    if (gridDim.x == 1 && !flagged && !due && *failed == 0 && *saw == 0) {
      if (!here) {  // not written yet (or a torn read): poll again
        if (!successor) continue;
        const bool stop = lane == 0 && HandOverNow(false, successor_since, last);
        if (!__shfl_sync(kAll, stop, 0)) continue;
        if (lane == 0) *decider = 1, *cmd = kCmdStop;
        return;
      }
      const uint32_t opn = __shfl_sync(kAll, static_cast<uint32_t>(w), kWordOpNsegs);
      const uint64_t segs = __shfl_sync(kAll, w, kWordSegs);
      const uint64_t len = __shfl_sync(kAll, w, kWordLen);
      if (ValidFields(opn & 0xffffu, opn >> 16, segs, len)) {
        if (lane < 8) words[lane] = w;
        if (lane == 0) {
          *decider = 1;
          if (successor) HandOverNow(true, successor_since, last);
        }
        Decided(opn >> 16, segs, staged, (opn & 0xffffu) == kProxyExit ? kCmdExit : kCmdCopy, cmd);
        return;
      }
      // Not valid: the general path raises the error.
    }
    const uint32_t latched = __shfl_sync(kAll, f, 8);
    const uint32_t inject = __shfl_sync(kAll, f, 9);
    // An error an earlier launch of the chain raised: copy nothing more
    // either, even before the host mirrors its latch.
    const uint32_t raised = __shfl_sync(kAll, f, 11);
    if (raised != 0 && *failed == 0) *failed = raised;
    if (lane < 8) words[lane] = w;
    __syncwarp();
    if (inject != 0 && *failed == 0) {
      *failed = kErrInjected;
      if (lane == 0) StoreSys32(&a.ctl->gpu_error, kErrInjected);
    }
    if (latched != 0 && *saw == 0) {
      *saw = 1;
      if (lane == 0) StoreSys32(&a.ctl->saw_latch, 1);
    }
    int rc = 0;
    Agreed ag{};
    if (lane == 0) {
      // Stop for a successor (lane 10's alive_gen newer, modulo 2^32): several
      // blocks at a poll that found no entry (one already here is served
      // without the hand-over's delay); one block right after the next entry,
      // or at such a poll once the lane was idle (see above). Past its life
      // the launch stops at once: a caller's cudaFree may be waiting.
      const bool old = due && GlobalTimer() - born > a.max_life_ns;
      bool want_stop = old || (successor && !here);
      if (gridDim.x == 1 && successor && !old) want_stop = HandOverNow(here, successor_since, last);
      rc = Agree(a, k, here, want_stop, &ag);
    }
    rc = __shfl_sync(kAll, rc, 0);
    if (rc != 0) continue;  // not written yet (or a torn read): poll again
    ag.cmd_stop = __shfl_sync(kAll, ag.cmd_stop, 0);
    if (lane == 0) *decider = ag.decider;
    if (ag.cmd_stop) {
      if (lane == 0) *cmd = kCmdStop;
      return;
    }
    if (!ValidFields(e->op, e->nsegs, e->segs, e->seg.len) && *failed == 0) {
      *failed = kErrBadEntry;
      if (lane == 0) StoreSys32(&a.ctl->gpu_error, kErrBadEntry);
    }
    Decided(e->nsegs, e->segs, staged,
            e->op == kProxyExit           ? kCmdExit
            : (*failed != 0 || *saw != 0) ? kCmdSkip
                                          : kCmdCopy,
            cmd);
    return;
  }
}

__device__ void CopyEntry(const ProxyEntry& e, const CopySeg* staged) {
  const uint32_t rank = blockIdx.x * blockDim.x + threadIdx.x;
  const uint32_t n = gridDim.x * blockDim.x;
  if (e.nsegs == 1) {
    const uint64_t dst = e.seg.dst, src = e.seg.src, len = e.seg.len;
    // The common small entry, 16-byte aligned and at most one vector per
    // thread: one load and one store, no head, tail or loop arithmetic.
    if (((dst | src | len) & 15) == 0 && len <= 16ull * n) {
      if (rank < static_cast<uint32_t>(len >> 4))
        reinterpret_cast<uint4*>(dst)[rank] = reinterpret_cast<const uint4*>(src)[rank];
      return;
    }
    CopyRange<kProxyUnroll>(dst, src, len, rank, n);
    return;
  }
  for (uint32_t i = 0; i < e.nsegs; ++i)
    CopyRange<kProxyUnroll>(staged[i].dst, staged[i].src, staged[i].len, rank, n);
}

// The request's terminal record (status ok) when the entry names one and was
// copied, and the lane's completion word, behind one system fence (device
// scope after a copy into this GPU's memory, kProxyCopyLocal). The host
// lets go of the request only once it has seen both, so a record write never
// lands after a later post began.
__device__ void Publish(const ProxyArgs& a, const ProxyEntry& e, bool skip) {
  uint64_t* record =
      !skip && e.record != 0 && e.record <= a.record_slots && a.records != nullptr
          ? reinterpret_cast<uint64_t*>(a.records + uint64_t{e.record - 1} * kRecordStride)
          : nullptr;
  StoreRecordAndDone(record, uint64_t{e.gen} << 32, &a.done[(e.value - 1) % kProxyRing],
                     skip ? e.value | kDoneSkipped : e.value, !skip && e.op == kProxyCopyLocal);
}

// Publishes entry number `n`: with several blocks the last to arrive does
// (and resets the entry's arrival count for its next use); a skip by any
// block marks it skipped.
__device__ void Finish(const ProxyArgs& a, const ProxyEntry& e, uint64_t n, bool skip) {
  if (skip && threadIdx.x == 0) atomicOr(&a.scratch->skipped, 1u);
  // The barrier orders every thread's copies before thread 0's system fence
  // (in StoreRecordAndDone), which is cumulative: one fence instead of one per thread.
  __syncthreads();
  if (threadIdx.x != 0) return;
  KVLANE_PROXY_MARK(4);
  if (gridDim.x == 1) {
    Publish(a, e, skip);
    KVLANE_PROXY_MARK(5);
    return;
  }
  // This block's copies before its arrival counts: as the copy kernel's blocks
  // do (SignalWhenLast), a system fence unless every destination is this GPU's
  // memory (or this block copied nothing): the last block's fence in Publish
  // orders only its own block's copies for a reader off this GPU.
  if (skip || e.op == kProxyCopyLocal)
    __threadfence();
  else
    __threadfence_system();
  unsigned int* count = &a.scratch->arrivals[n % kProxyRing];
  if (atomicAdd(count, 1u) + 1 != gridDim.x) return;
  *count = 0;  // every block is done with it; its next use is kProxyRing entries later
  Publish(a, e, atomicOr(&a.scratch->skipped, 0u) != 0);
}

// The record the successor starts from: written by the block that decided
// the stop, consumed the exit entry, or (one block) published the entry it
// stopped after, after its earlier writes: into device
// memory for the successor (device scope: it runs on this GPU), then into
// pinned host memory for the host (CudaProxy::Tend, which orders nothing by
// it: no system fence, which would disturb the successor's first requests).
__device__ void HandOff(const ProxyArgs& a, uint64_t next, bool exit) {
  const uint64_t w = PackTagged(a.gen, next, exit);
  __threadfence();
  *reinterpret_cast<volatile unsigned long long*>(&a.chain->handoff) = w;
  StoreRelaxedSys64(&a.ctl->handoff, w);
}

// Thread 0 of each block. Block 0 reports the launch alive, waits for the
// predecessor's hand-off record (or takes the host's, for a chain's first
// launch) and passes it on to the other blocks through
// the scratch (so that a block the GPU schedules late still serves every entry
// the launch served). Returns false when the chain ended at an exit entry
// (block 0 passes that on to the successor too).
__device__ bool FirstEntry(const ProxyArgs& a, uint64_t* first) {
  auto* start = reinterpret_cast<volatile unsigned long long*>(&a.scratch->start);
  uint64_t w;
  if (blockIdx.x == 0) {
    // No fence (nothing to order): one would disturb the serving launch.
    *reinterpret_cast<volatile uint32_t*>(&a.chain->alive_gen) = static_cast<uint32_t>(a.gen);
    if (a.start_given != 0) {
      w = a.start;
    } else {
      while (TaggedGen16(w = *reinterpret_cast<volatile unsigned long long*>(&a.chain->handoff)) !=
             ((a.gen - 1) & 0xffff)) {
      }
      // Acquire (device scope, as HandOff released it): what the predecessor
      // stored before its hand-off, its raised error (gpu_error) among them,
      // is seen by this launch's first look.
      __threadfence();
    }
    if (TaggedFlag(w)) HandOff(a, TaggedCount(w), true);
    if (gridDim.x > 1) {
      *start = PackTagged(a.gen, TaggedCount(w), TaggedFlag(w));
      __threadfence();
    }
  } else {
    while (TaggedGen16(w = *start) != (a.gen & 0xffff)) {
    }
  }
  *first = TaggedCount(w);
  return !TaggedFlag(w);
}

__global__ void __launch_bounds__(kProxyThreads) ProxyKernel(ProxyArgs a) {
  __shared__ ProxyEntry entry;
  __shared__ CopySeg staged[kProxyMaxSegs];
  __shared__ int cmd, decider, go, last;
  __shared__ uint64_t first, born;
  KVLANE_PROXY_MARK(8);
  if (threadIdx.x == 0) {
    go = FirstEntry(a, &first) ? 1 : 0;
    born = GlobalTimer();
    last = 0;
  }
  __syncthreads();
  if (!go) return;
  uint32_t failed = 0, saw = 0, tick = 0;  // warp 0's view of the error flags; its polls
  uint64_t successor_since = 0;            // lane 0's (see Poll)
  for (uint64_t n = first;; ++n) {
    // Past Finish's barrier only thread 0 still reads `entry` (to publish it):
    // its warp waits for it before overwriting the entry. The other warps read
    // `entry`, `staged` and `cmd` only before that barrier, so they need no
    // second one (it cost ~65 ns per entry with 1,024 threads). This holds
    // because every command but exit and stop (which return) reaches Finish's
    // barrier, a skip included: a path back to Poll without it would let warp
    // 0 overwrite what the other warps still read.
    if (threadIdx.x < 32) {
      __syncwarp();
      Poll(a, n, n - first, born, &tick, &entry, staged, &cmd, &decider, &last, &successor_since,
           &failed, &saw);
    }
    __syncthreads();
    const int c = cmd;
    const bool stop_after = last != 0;  // read before Finish's barrier, like cmd
    if (c == kCmdExit || c == kCmdStop) {
      if (threadIdx.x == 0 && decider) HandOff(a, c == kCmdStop ? n : n + 1, c == kCmdExit);
      return;
    }
    KVLANE_PROXY_MARK(2);
    if (c == kCmdCopy) CopyEntry(entry, staged);
    KVLANE_PROXY_MARK(3);
    Finish(a, entry, n, c == kCmdSkip);
    KVLANE_PROXY_MARK(6);
    if (stop_after) {  // one block (see Poll): its thread 0 published the entry in Finish
      if (threadIdx.x == 0) HandOff(a, n + 1, false);
      return;
    }
  }
}

}  // namespace

cudaError_t LaunchProxy(const ProxyArgs& args, int blocks, cudaStream_t stream) {
  ProxyKernel<<<blocks, kProxyThreads, 0, stream>>>(args);
  return cudaGetLastError();
}

}  // namespace kvlane::gpu
