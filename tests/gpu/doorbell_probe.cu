// cuda_doorbell_probe: a resident kernel (1 block of 1024 threads) polls a
// doorbell in pinned, mapped host memory; on each new value k it writes 4 KiB
// of data to GPU 1 and then publishes a record k to pinned host memory. The
// proxy's shape (src/gpu/proxy_kernel.cu: warp 0 polls, __syncthreads, all
// copy, __syncthreads, thread 0 publishes) against the shape session 6 tried
// and dropped (pollers apart from copiers, named barriers kGo/kDone, a copier
// leader that fences and publishes, poll ahead): which element costs time?
//
// First a kernel times 64 blocking loads of the doorbell (the round trip, RTT,
// which sets the pollers' stagger). Then per variant a kernel waits for
// doorbell == k, k = 1, 2, .... Common to all variants:
//  - data: 4 KiB as 256 uint4 stores (the value derived from k) to a buffer on
//    GPU 1 (peer, over NVLink), or on GPU 0 where there is no peer GPU (the
//    header says which); threads 0..255 (copier ranks 0..255 in "new") store
//    one each ("old-1warp-copy", "finder": one warp, 8 per lane). At the end of each pass (untimed)
//    the host checks the buffer holds the last k's pattern: "check" PASS / FAIL.
//  - publish "sc": __threadfence_system() (fence.sc.sys) then a volatile store
//    of the record, by one thread, after a barrier over the copying threads
//    (__syncwarp in "finder").
//  - polling loads: ld.relaxed.sys by lane 0 of a poller warp.
// Variants:
//  - "old": the previous engine. Warp 0 polls (lane 0, one load at a time,
//    blocking) for k; __syncthreads; threads 0..255 copy; __syncthreads;
//    thread 0 fences and publishes; __syncthreads; again.
//  - "old-bar1": "old", but each __syncthreads is bar.sync 1, 1024 (named
//    barrier 1, immediate count): does a named barrier cost more than
//    barrier 0? (SASS: the same code but BAR.SYNC 0x1, 0x400 for BAR.SYNC 0x0.)
//  - "old-ahead": "old", but lane 0 of warp 0 issues one load of the doorbell
//    right after the first __syncthreads and consumes it only after the last
//    one (it is the first read of the next poll): a read in flight during the
//    copy and the fence, in the publishing thread's own warp.
//  - "old-pub32": "old", but thread 32 (warp 1) fences and publishes (warp 0
//    still polls and copies with the others).
//  - "old-ahead-pub32": "old-ahead" with thread 32 publishing: the read in
//    flight is in ANOTHER warp than the fence (as in "new").
//  - "old-1warp-copy": "old", but only warp 1 stores the data (8 uint4 per
//    lane) and thread 32 publishes; the other warps idle at the barriers.
//  - "new-P", P = 1, 2, 4 (the engine's structure): warps 0..P-1 poll, lane 0
//    of each holds one load of its own copy of the doorbell (a 64-byte line
//    each), issuing in turn RTT/P cycles apart (P = 1: at once). The poller
//    that sees k claims it (atomicCAS on a shared counter), waits until the
//    copiers freed k-1 (ld.acquire.cta of `freed`), writes k to shared memory
//    and arrives at named barrier 1 (bar.arrive 1, copiers + 32, the whole
//    warp), then polls for k+1 at once (a read in flight during the copy and
//    the fence: poll ahead). Copiers (warps P..31) loop: bar.sync 1; ranks
//    0..255 copy; bar.sync 2 (copiers); the leader (thread 32P) st.release.cta's
//    freed = k, then fences and publishes. Exit: the first poller to claim
//    the kExit value passes it to the copiers through barrier 1 and tells the
//    other pollers to leave (another that claims it too leaves at once).
//  - "new-1-sync", "new-1-plain", "new-1-sync-plain": "new-1", but the claimer
//    waits at barrier 1 (bar.sync) instead of arriving, and/or claims and
//    frees with plain shared stores and loads (no atomics, no acquire/release).
//  - "new-P-noahead", P = 1, 4: "new-P", but no poller issues a read while a
//    claimed k is not freed yet (claimed - 1 != freed): no read in flight
//    during the copy and the fence (except one already issued when k was
//    claimed, by another poller).
//  - "finder-P", P = 2, 4: no copiers, no block barrier (the design of
//    "warps D=2/4 mirror" at commit 2403192; 1024 threads launched, warps
//    P..31 return at once). Warps 0..P-1 poll as in "new-P"; the poller that
//    sees k claims it (atomicCAS) and finds it: lane 0 waits until k-1 is
//    published (ld.acquire.cta of `published`), its 32 lanes store the 4 KiB
//    (8 uint4 each), __syncwarp, lane 0 fences and publishes, then
//    st.release.cta's published = k (records in increasing k, though different
//    threads store them). The other pollers keep polling meanwhile (a finding
//    poller's turns are skipped). Exit as in "new" (the first claimer of kExit
//    tells the others to leave; another claimer of it leaves at once).
// The host writes k to the doorbell copies the variant polls and times until
// record == k: back to back, and with a random 0-3 us busy wait before each
// write (a random poll phase). 200 warm-up + 2000 measured doorbells per
// pass. All variants run twice, interleaved (round 1, 2), in one process;
// then p50 and p99 by variant, mean of the two rounds.
// SASS (sm_90a, CUDA 13): __threadfence_system() is MEMBAR.SC.SYS + ERRBAR +
// CGAERRBAR + CCTL.IVALL; the st.release.cta of `freed` is MEMBAR.ALL.CTA +
// STS (as in the engine). "new" pollers: the LDG is issued inside the lane-0
// branch and first waited on by the SHFL after its BSYNC. "old-ahead*": the
// LDG after the first BAR.SYNC is first waited on by the branch at the top of
// the loop, after the last BAR.SYNC; nothing between (copy, fence) waits on it.
// "finder" pollers: as "new" (LDG in the lane-0 branch, first used by the SHFL
// after its BSYNC); published = k is MEMBAR.ALL.CTA + STS after the record's
// STG.STRONG.SYS (it waits for that store, but after the record is issued).
// The earlier variant set (D=1 / warps D=2,4 x sc/acqrel/release/none x
// nodata/4KiB, one warp doing everything) is this file at commit 2403192.
//   usage: cuda_doorbell_probe
#include <cuda_runtime.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "gpu/copy_device.cuh"

namespace {

using Clock = std::chrono::steady_clock;

constexpr uint64_t kExit = ~0ull;  // doorbell value that ends the kernel
constexpr int kMaxCopies = 8;      // doorbell copies, one per 64-byte line
constexpr int kLineWords = 64 / sizeof(uint64_t);
constexpr int kRttSamples = 64;
constexpr int kWarmup = 200;
constexpr int kIters = 2000;
constexpr int kThreads = 1024;
constexpr int kDataBytes = 4096;
constexpr int kDataWords = kDataBytes / 16;    // uint4 stores, one per copying thread
constexpr int kDataPerLane = kDataWords / 32;  // uint4 stores per lane, one warp copying
constexpr unsigned kFullMask = 0xffffffffu;
constexpr auto kTimeout = std::chrono::seconds(1);

bool Ok(cudaError_t e, const char* what, int line) {
  if (e != cudaSuccess)
    std::fprintf(stderr, "line %d: %s: %s\n", line, what, cudaGetErrorString(e));
  return e == cudaSuccess;
}
#define CUDA_OK(call) Ok((call), #call, __LINE__)

using kvlane::gpu::LoadSys64;

__device__ __forceinline__ uint64_t GlobalTimerNs() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

template <typename T>
__device__ __forceinline__ T Peek(const T& v) {
  return *reinterpret_cast<const volatile T*>(&v);
}

// Block-scope release store and acquire load (`freed`), as the engine.
__device__ __forceinline__ void StoreRelease(unsigned long long* p, unsigned long long v) {
  asm volatile("st.release.cta.shared.u64 [%0], %1;" ::"r"(
                   static_cast<unsigned>(__cvta_generic_to_shared(p))),
               "l"(v)
               : "memory");
}
__device__ __forceinline__ unsigned long long LoadAcquire(const unsigned long long* p) {
  unsigned long long v;
  asm volatile("ld.acquire.cta.shared.u64 %0, [%1];"
               : "=l"(v)
               : "r"(static_cast<unsigned>(__cvta_generic_to_shared(p)))
               : "memory");
  return v;
}

// Named barriers, immediate id and thread count.
template <int kId, int kCount>
__device__ __forceinline__ void BarSync() {
  asm volatile("bar.sync %0, %1;" ::"n"(kId), "n"(kCount) : "memory");
}
template <int kId, int kCount>
__device__ __forceinline__ void BarArrive() {
  asm volatile("bar.arrive %0, %1;" ::"n"(kId), "n"(kCount) : "memory");
}

// The pattern for doorbell k, uint4 number i of the data buffer (host too).
__host__ __device__ __forceinline__ uint4 DataWord(uint64_t k, unsigned i) {
  const auto lo = static_cast<unsigned>(k), hi = static_cast<unsigned>(k >> 32);
  return make_uint4(lo, hi, i, lo ^ 0x9e3779b9u ^ (i << 16));
}

// Lane `lane` of the one copying warp writes its 8 of the 256 uint4
// (coalesced: uint4 j * 32 + lane).
__device__ __forceinline__ void WriteDataWarp(uint4* data, uint64_t k, unsigned lane) {
#pragma unroll
  for (int j = 0; j < kDataPerLane; ++j) {
    const unsigned i = j * 32 + lane;
    data[i] = DataWord(k, i);
  }
}

// The record store, sc: the barrier before it orders the other threads' data
// stores before it, the fence (cumulative) orders them before the record.
__device__ __forceinline__ void Publish(uint64_t* record, uint64_t k) {
  __threadfence_system();
  *reinterpret_cast<volatile uint64_t*>(record) = k;
}

// Times kRttSamples blocking loads of *bell; cycles[j] per load (device memory),
// *total_ns the whole run by the global timer.
__global__ void RoundTrip(const uint64_t* bell, uint64_t* cycles, uint64_t* total_ns) {
  __shared__ volatile uint64_t sink;  // the store waits for the load before the clock read
  const uint64_t g0 = GlobalTimerNs();
  for (int j = 0; j < kRttSamples; ++j) {
    const uint64_t t0 = clock64();
    sink = LoadSys64(bell);
    cycles[j] = clock64() - t0;
  }
  *total_ns = GlobalTimerNs() - g0;
}

// The block barrier of "old": __syncthreads() (barrier 0), or named barrier 1
// with an explicit count of all kThreads threads ("old-bar1").
// Lane 0 of poller `w` whose turn it is: hands the turn on, then issues its
// read (not waited for here). Handing on first: ptxas hoists the first use of
// the result (and its wait for the load) above later independent code.
template <int P>
__device__ __forceinline__ uint64_t TakeTurnAndRead(const uint64_t* bell, volatile unsigned long long& last,
                                                    volatile int& turn, int w) {
  if (P > 1) {
    last = clock64();
    turn = (w + 1) % P;
  }
  return LoadSys64(bell);
}

template <bool kBar1>
__device__ __forceinline__ void BlockSync() {
  if constexpr (kBar1)
    BarSync<1, kThreads>();
  else
    __syncthreads();
}

// "old" and its variants (blockDim.x = 1024). kAhead: lane 0 of warp 0 has a
// read of the doorbell in flight from the first barrier to the top of the next
// poll. kWarp1Copy: only warp 1 copies. kPublisher: the thread that fences and
// publishes. kBar1: every block barrier is bar.sync 1, kThreads.
template <bool kAhead, bool kWarp1Copy, int kPublisher, bool kBar1 = false>
__global__ void __launch_bounds__(kThreads)
    OldKernel(const uint64_t* bells, uint64_t* record, uint4* data) {
  __shared__ unsigned long long cur;  // the k to copy, or kExit
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  uint64_t ahead = 0;  // thread 0: the read issued before the copy (kAhead)
  for (uint64_t k = 1;; ++k) {
    if (threadIdx.x == 0) {
      uint64_t got = ahead;  // the read in flight is consumed here, after the last barrier
      while (got < k) got = LoadSys64(bells);  // kExit is >= any k
      cur = got;
    }
    BlockSync<kBar1>();
    if (kAhead && threadIdx.x == 0) ahead = LoadSys64(bells);
    const uint64_t v = Peek(cur);
    if (v == kExit) return;
    if (kWarp1Copy) {
      if (warp == 1) WriteDataWarp(data, v, lane);
    } else if (threadIdx.x < kDataWords) {
      data[threadIdx.x] = DataWord(v, threadIdx.x);
    }
    BlockSync<kBar1>();
    if (threadIdx.x == kPublisher) Publish(record, v);
    BlockSync<kBar1>();
  }
}

// "new-P" (kAhead) and "new-P-noahead" (blockDim.x = 1024): warps 0..P-1 poll,
// the others copy; see the top comment.
// kMode bits (P = 1 only): 1: the claimer waits at kGo (bar.sync) instead of
// arriving; 2: no atomics and no acquire/release (plain claim, volatile freed).
template <int P, bool kAhead, int kMode = 0>
__global__ void __launch_bounds__(kThreads)
    NewKernel(const uint64_t* bells, uint64_t* record, uint4* data, uint64_t gap) {
  constexpr int kCopiers = kThreads - 32 * P;
  constexpr int kGoCount = kCopiers + 32;  // the copiers and the claimer's warp
  constexpr int kGo = 1, kDone = 2;
  constexpr unsigned kLeader = 32 * P;       // copier rank 0
  __shared__ unsigned long long claimed;     // doorbell values below it are claimed
  __shared__ unsigned long long freed;       // the last value copied and published
  __shared__ unsigned long long cur;         // the claimed value handed to the copiers, or kExit
  __shared__ unsigned long long last_issue;  // clock64 of the latest read, any poller
  __shared__ int turn;                       // the poller that reads next
  __shared__ int stop;                       // a poller claimed kExit: the others leave
  __shared__ int exit_taken;                 // the first poller to claim kExit passes it on
  if (threadIdx.x == 0)
    claimed = 1, freed = 0, cur = 0, last_issue = 0, turn = 0, stop = 0, exit_taken = 0;
  __syncthreads();
  const unsigned lane = threadIdx.x % 32;
  const int w = static_cast<int>(threadIdx.x / 32);
  if (w >= P) {  // copier
    const unsigned rank = threadIdx.x - kLeader;
    for (;;) {
      BarSync<kGo, kGoCount>();
      const uint64_t k = Peek(cur);
      if (k == kExit) return;
      if (rank < kDataWords) data[rank] = DataWord(k, rank);
      BarSync<kDone, kCopiers>();
      if (threadIdx.x == kLeader) {
        // Free the slot before the publish: a release after the system store
        // of the record would wait for that store (MEMBAR.ALL.CTA).
        if (kMode & 2)
          *reinterpret_cast<volatile unsigned long long*>(&freed) = k;
        else
          StoreRelease(&freed, k);  // the copiers' reads of cur (before kDone) come first
        Publish(record, k);
      }
    }
  }
  // poller w
  const uint64_t* bell = bells + w * kLineWords;
  volatile unsigned long long& v_last = last_issue;
  volatile int& v_turn = turn;
  volatile int& v_stop = stop;
  for (;;) {
    int leave = 0;
    uint64_t got = 0;
    if (lane == 0) {
      // Wait for: the turn (P > 1), no claimed value pending (noahead).
      for (;;) {
        if (v_stop != 0) {
          leave = 1;
          break;
        }
        if (!kAhead && ((kMode & 2) ? Peek(freed) : LoadAcquire(&freed)) + 1 != Peek(claimed))
          continue;
        if (P > 1 && (v_turn != w || static_cast<uint64_t>(clock64()) - v_last < gap)) continue;
        break;
      }
      if (!leave) got = TakeTurnAndRead<P>(bell, v_last, v_turn, w);
    }
    // The read's first use, after the lanes reconverged.
    got = __shfl_sync(kFullMask, got, 0);
    if (__shfl_sync(kFullMask, leave, 0) != 0) return;
    unsigned long long n = 0;  // the value claimed, 0: none
    if (lane == 0) {
      const unsigned long long next = Peek(claimed);
      if ((kMode & 2) && got >= next) {
        claimed = next + 1;
        n = next;
      } else if (!(kMode & 2) && got >= next && atomicCAS(&claimed, next, next + 1) == next) {
        n = next;
      }
    }
    n = __shfl_sync(kFullMask, n, 0);
    if (n == 0) continue;  // not here yet, or another poller has it
    const bool exit = got == kExit;
    // Several pollers may claim kExit (as n and n + 1 ...): only the first
    // passes it on; the others leave (the copiers never free their n).
    int other_exit = 0;
    if (lane == 0 && exit) other_exit = atomicExch(&exit_taken, 1) != 0;
    if (__shfl_sync(kFullMask, other_exit, 0) != 0) return;
    if (lane == 0) {
      if (exit) v_stop = 1;
      while (((kMode & 2) ? Peek(freed) : LoadAcquire(&freed)) !=
             n - 1) {  // the copiers are done with n - 1
      }
      cur = exit ? kExit : n;
    }
    __syncwarp();
    if (kMode & 1)
      BarSync<kGo, kGoCount>();
    else
      BarArrive<kGo, kGoCount>();
    if (exit) return;
  }
}

// "finder-P" (blockDim.x = 1024; warps P.. return at once): the PollWarps
// design of commit 2403192. Warps 0..P-1 poll as in "new-P" (lane 0 holds one
// load of its own doorbell copy, in turn, gap apart; the load's first use is
// after reconvergence); the poller that sees k claims it (atomicCAS) and is its
// finder: lane 0 waits until k - 1 is published (ld.acquire.cta of
// `published`), the 32 lanes write the 4 KiB, __syncwarp, lane 0 fences and
// publishes, then st.release.cta's published = k (orders record k - 1 before
// record k, another thread's store). Meanwhile the other pollers keep polling:
// a finder is marked `busy` and its turns are skipped. No block barrier: no
// warp ever waits for another's load.
template <int P>
__global__ void __launch_bounds__(kThreads)
    FinderKernel(const uint64_t* bells, uint64_t* record, uint4* data, uint64_t gap) {
  static_assert(P >= 1 && P <= kMaxCopies && P <= 32);
  __shared__ unsigned long long claimed;     // doorbell values below it are claimed
  __shared__ unsigned long long published;   // the last value whose record is stored
  __shared__ unsigned long long last_issue;  // clock64 of the latest read, any poller
  __shared__ int turn;                       // the poller that reads next (busy ones skipped)
  __shared__ int busy;                       // bit w: poller w is finding (copy, publish)
  __shared__ int stop;                       // a poller claimed kExit: the others leave
  __shared__ int exit_taken;                 // the first poller to claim kExit
  if (threadIdx.x == 0)
    claimed = 1, published = 0, last_issue = 0, turn = 0, busy = 0, stop = 0, exit_taken = 0;
  __syncthreads();
  const unsigned lane = threadIdx.x % 32;
  const int w = static_cast<int>(threadIdx.x / 32);
  if (w >= P) return;  // the launch shape of the others; only P warps work
  const uint64_t* bell = bells + w * kLineWords;
  volatile unsigned long long& v_last = last_issue;
  volatile int& v_turn = turn;
  volatile int& v_busy = busy;
  volatile int& v_stop = stop;
  for (;;) {
    int leave = 0;
    uint64_t got = 0;
    if (lane == 0) {
      // Wait for the turn (P > 1): the first poller from `turn` on that is not
      // busy finding.
      for (;;) {
        if (v_stop != 0) {
          leave = 1;
          break;
        }
        if (P > 1) {
          const int b = v_busy;
          int t = v_turn;
          for (int i = 1; i < P && ((b >> t) & 1) != 0; ++i) t = (t + 1) % P;
          if (t != w || static_cast<uint64_t>(clock64()) - v_last < gap) continue;
        }
        break;
      }
      if (!leave) got = TakeTurnAndRead<P>(bell, v_last, v_turn, w);
    }
    // The read's first use, after the lanes reconverged.
    got = __shfl_sync(kFullMask, got, 0);
    if (__shfl_sync(kFullMask, leave, 0) != 0) return;
    unsigned long long n = 0;  // the value claimed, 0: none
    if (lane == 0) {
      const unsigned long long next = Peek(claimed);
      if (got >= next && atomicCAS(&claimed, next, next + 1) == next) n = next;
    }
    n = __shfl_sync(kFullMask, n, 0);
    if (n == 0) continue;  // not here yet, or another poller has it
    if (got == kExit) {
      // The first claimer of kExit tells the others to leave; any other
      // claimer of it (as n + 1 ...) leaves at once. Nobody waits on an exit
      // claim: every claim after it is kExit too.
      if (lane == 0 && atomicExch(&exit_taken, 1) == 0) v_stop = 1;
      return;
    }
    if (lane == 0) {
      if (P > 1) atomicOr(&busy, 1 << w);
      while (LoadAcquire(&published) != n - 1) {  // records in increasing k
      }
    }
    __syncwarp();  // lane 0's acquire before the lanes' data stores
    WriteDataWarp(data, n, lane);
    __syncwarp();  // the lanes' data stores before lane 0's fence
    if (lane == 0) {
      Publish(record, n);
      StoreRelease(&published, n);  // after the record store: off its path
      if (P > 1) atomicAnd(&busy, ~(1 << w));
    }
  }
}

enum class Kind {
  kOld,
  kOldBar1,
  kOldAhead,
  kOldPub32,
  kOldAheadPub32,
  kOld1WarpCopy,
  kNew,
  kNewNoAhead,
  kNewSync,
  kNewPlain,
  kNewSyncPlain,
  kFinder
};

struct Variant {
  const char* name;
  Kind kind;
  int polls;  // poller warps = doorbell copies the host writes
};

struct Ctx {
  uint64_t* bells = nullptr;       // pinned host, mapped: kMaxCopies lines of 64 B in 4 KiB
  uint64_t* record = nullptr;      // pinned host, mapped: 64 B
  uint64_t* dev_bells = nullptr;   // device view of bells
  uint64_t* dev_record = nullptr;  // device view of record
  uint4* data = nullptr;           // kDataBytes on GPU 1 (peer) or GPU 0
  int data_device = 0;
  cudaStream_t stream = nullptr;
  uint64_t rtt_cycles = 0;  // median single-load round trip
};

void WriteBells(Ctx& c, uint64_t value, int copies) {
  for (int i = 0; i < copies; ++i)
    reinterpret_cast<volatile uint64_t*>(c.bells)[i * kLineWords] = value;
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

// Ends the kernel via kExit; false if it does not end within kTimeout.
bool StopKernel(Ctx& c) {
  WriteBells(c, kExit, kMaxCopies);
  const Clock::time_point deadline = Clock::now() + kTimeout;
  cudaError_t e;
  while ((e = cudaStreamQuery(c.stream)) == cudaErrorNotReady) {
    if (Clock::now() > deadline) {
      std::fprintf(stderr, "cuda_doorbell_probe: kernel did not stop within 1 s\n");
      return false;
    }
  }
  return CUDA_OK(e);
}

template <int P>
void LaunchNew(Ctx& c, bool ahead, uint64_t gap) {
  if (ahead)
    NewKernel<P, true><<<1, kThreads, 0, c.stream>>>(c.dev_bells, c.dev_record, c.data, gap);
  else
    NewKernel<P, false><<<1, kThreads, 0, c.stream>>>(c.dev_bells, c.dev_record, c.data, gap);
}

bool Launch(Ctx& c, const Variant& var) {
  const uint64_t gap = var.polls == 1 ? 0 : c.rtt_cycles / var.polls;
  const auto b = c.dev_bells;
  const auto r = c.dev_record;
  const auto d = c.data;
  switch (var.kind) {
    case Kind::kOld:
      OldKernel<false, false, 0><<<1, kThreads, 0, c.stream>>>(b, r, d);
      break;
    case Kind::kOldBar1:
      OldKernel<false, false, 0, true><<<1, kThreads, 0, c.stream>>>(b, r, d);
      break;
    case Kind::kOldAhead:
      OldKernel<true, false, 0><<<1, kThreads, 0, c.stream>>>(b, r, d);
      break;
    case Kind::kOldPub32:
      OldKernel<false, false, 32><<<1, kThreads, 0, c.stream>>>(b, r, d);
      break;
    case Kind::kOldAheadPub32:
      OldKernel<true, false, 32><<<1, kThreads, 0, c.stream>>>(b, r, d);
      break;
    case Kind::kOld1WarpCopy:
      OldKernel<false, true, 32><<<1, kThreads, 0, c.stream>>>(b, r, d);
      break;
    case Kind::kNew:
    case Kind::kNewSync:
      NewKernel<1, true, 1><<<1, kThreads, 0, c.stream>>>(b, r, d, gap);
      break;
    case Kind::kNewPlain:
      NewKernel<1, true, 2><<<1, kThreads, 0, c.stream>>>(b, r, d, gap);
      break;
    case Kind::kNewSyncPlain:
      NewKernel<1, true, 3><<<1, kThreads, 0, c.stream>>>(b, r, d, gap);
      break;
    case Kind::kFinder:
      if (var.polls == 2)
        FinderKernel<2><<<1, kThreads, 0, c.stream>>>(b, r, d, gap);
      else if (var.polls == 4)
        FinderKernel<4><<<1, kThreads, 0, c.stream>>>(b, r, d, gap);
      else
        return false;
      break;
    case Kind::kNewNoAhead: {
      const bool ahead = var.kind == Kind::kNew;
      if (var.polls == 1)
        LaunchNew<1>(c, ahead, gap);
      else if (var.polls == 2)
        LaunchNew<2>(c, ahead, gap);
      else if (var.polls == 4)
        LaunchNew<4>(c, ahead, gap);
      else
        return false;
      break;
    }
  }
  return CUDA_OK(cudaGetLastError());
}

// True if the data buffer holds the pattern of doorbell k.
bool CheckData(const Ctx& c, uint64_t k) {
  std::vector<uint4> host(kDataBytes / 16);
  if (!CUDA_OK(cudaMemcpy(host.data(), c.data, kDataBytes, cudaMemcpyDefault))) return false;
  for (unsigned i = 0; i < host.size(); ++i) {
    const uint4 want = DataWord(k, i);
    if (host[i].x != want.x || host[i].y != want.y || host[i].z != want.z || host[i].w != want.w)
      return false;
  }
  return true;
}

// One kernel, kWarmup + kIters doorbells; appends the measured latencies (us).
// Clears the data buffer first and sets *check to whether it ends with the
// last k's pattern. Exits the process if the kernel neither answers nor stops.
bool RunPass(Ctx& c, const Variant& var, bool random_phase, std::vector<double>& us, bool* check) {
  const std::vector<char> zeros(kDataBytes, 0);
  if (!CUDA_OK(cudaMemcpy(c.data, zeros.data(), kDataBytes, cudaMemcpyDefault))) return false;
  WriteBells(c, 0, kMaxCopies);
  *reinterpret_cast<volatile uint64_t*>(c.record) = 0;
  if (!Launch(c, var)) return false;
  const int copies = var.polls;  // poller warp i polls copy i
  std::mt19937 rng(12345);
  std::uniform_int_distribution<int> phase_ns(0, 3000);
  const volatile uint64_t* record = c.record;
  constexpr uint64_t kLast = kWarmup + kIters;
  for (uint64_t k = 1; k <= kLast; ++k) {
    if (random_phase) {
      const Clock::time_point until = Clock::now() + std::chrono::nanoseconds(phase_ns(rng));
      while (Clock::now() < until) {
      }
    }
    const Clock::time_point t0 = Clock::now();
    WriteBells(c, k, copies);
    const Clock::time_point deadline = t0 + kTimeout;
    for (uint32_t n = 1; *record != k; ++n) {
      if (n % 1024 == 0 && Clock::now() > deadline) {
        std::fprintf(stderr, "cuda_doorbell_probe: %s: no record %llu within 1 s\n", var.name,
                     static_cast<unsigned long long>(k));
        if (!StopKernel(c)) std::_Exit(2);
        return false;
      }
    }
    const Clock::time_point t1 = Clock::now();
    if (k > kWarmup) us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  if (!StopKernel(c)) std::_Exit(2);
  *check = CheckData(c, kLast);
  return true;
}

double Pct(const std::vector<double>& sorted, double q) {
  return sorted[std::min(sorted.size() - 1,
                         static_cast<size_t>(q * static_cast<double>(sorted.size())))];
}

// Median round trip of one blocking load, printed with the clock it assumes.
bool MeasureRoundTrip(Ctx& c) {
  uint64_t* dev = nullptr;  // kRttSamples cycle counts, then the total ns
  if (!CUDA_OK(cudaMalloc(&dev, (kRttSamples + 1) * sizeof(uint64_t)))) return false;
  std::vector<uint64_t> host(kRttSamples + 1);
  RoundTrip<<<1, 1, 0, c.stream>>>(c.dev_bells, dev, dev + kRttSamples);
  const bool ok =
      CUDA_OK(cudaGetLastError()) && CUDA_OK(cudaStreamSynchronize(c.stream)) &&
      CUDA_OK(cudaMemcpy(host.data(), dev, host.size() * sizeof(uint64_t), cudaMemcpyDeviceToHost));
  if (!CUDA_OK(cudaFree(dev)) || !ok) return false;
  const double total_ns = static_cast<double>(host[kRttSamples]);
  host.pop_back();
  std::sort(host.begin(), host.end());
  c.rtt_cycles = host[kRttSamples / 2];
  int clock_khz = 0;
  if (!CUDA_OK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0))) return false;
  std::printf("cudaDevAttrClockRate: %d (kHz)\n", clock_khz);
  std::printf(
      "single-load round trip: median %llu cycles (min %llu, max %llu) = %.0f ns at that clock;"
      " globaltimer mean %.0f ns\n",
      static_cast<unsigned long long>(c.rtt_cycles), static_cast<unsigned long long>(host.front()),
      static_cast<unsigned long long>(host.back()),
      static_cast<double>(c.rtt_cycles) * 1e6 / clock_khz, total_ns / kRttSamples);
  return true;
}

// The data buffer: on GPU 1 with peer access from GPU 0 if there is one, else
// on GPU 0.
bool SetupData(Ctx& c, int devices) {
  int can = 0;
  if (devices > 1 && CUDA_OK(cudaDeviceCanAccessPeer(&can, 0, 1)) && can) {
    void* p = nullptr;
    if (!CUDA_OK(cudaSetDevice(1)) || !CUDA_OK(cudaMalloc(&p, kDataBytes)) ||
        !CUDA_OK(cudaSetDevice(0)))
      return false;
    const cudaError_t e = cudaDeviceEnablePeerAccess(1, 0);
    if (e != cudaErrorPeerAccessAlreadyEnabled && !CUDA_OK(e)) return false;
    (void)cudaGetLastError();  // clears cudaErrorPeerAccessAlreadyEnabled
    c.data = static_cast<uint4*>(p);
    c.data_device = 1;
    return true;
  }
  void* p = nullptr;
  if (!CUDA_OK(cudaMalloc(&p, kDataBytes))) return false;
  c.data = static_cast<uint4*>(p);
  c.data_device = 0;
  return true;
}

bool Setup(Ctx& c, int devices) {
  void* bells = nullptr;
  void* record = nullptr;
  if (!CUDA_OK(cudaSetDevice(0)) || !CUDA_OK(cudaHostAlloc(&bells, 4096, cudaHostAllocMapped)) ||
      !CUDA_OK(cudaHostAlloc(&record, 64, cudaHostAllocMapped)))
    return false;
  std::memset(bells, 0, 4096);
  std::memset(record, 0, 64);
  c.bells = static_cast<uint64_t*>(bells);
  c.record = static_cast<uint64_t*>(record);
  return CUDA_OK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&c.dev_bells), bells, 0)) &&
         CUDA_OK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&c.dev_record), record, 0)) &&
         CUDA_OK(cudaStreamCreateWithFlags(&c.stream, cudaStreamNonBlocking)) &&
         SetupData(c, devices);
}

int Main() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::printf("cuda_doorbell_probe: no CUDA device\n");
    return 77;
  }
  Ctx c;
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  CPU_SET(2, &cpus);
  const bool pinned = sched_setaffinity(0, sizeof(cpus), &cpus) == 0;  // failure is fine
  if (!Setup(c, n) || !MeasureRoundTrip(c)) return 1;
  cudaDeviceProp prop{};
  if (!CUDA_OK(cudaGetDeviceProperties(&prop, 0))) return 1;
  std::printf(
      "device 0: %s; %d devices; host thread %s CPU 2; %d warm-up + %d measured "
      "doorbells per pass\n",
      prop.name, n, pinned ? "pinned to" : "NOT pinned to", kWarmup, kIters);
  std::printf("4KiB data buffer: %s\n", c.data_device == 1
                                            ? "on GPU 1 (peer access from GPU 0)"
                                            : "on GPU 0 (NO peer GPU: local, not NVLink)");
  std::printf(
      "1 block x %d threads; publish sc; 4KiB data. Poller gap (cycles) P=2: %llu, P=4: %llu.\n"
      "Latency: host write of k -> host sees record k, us.\n",
      kThreads, static_cast<unsigned long long>(c.rtt_cycles / 2),
      static_cast<unsigned long long>(c.rtt_cycles / 4));
  const Variant variants[] = {
      {"old", Kind::kOld, 1},
      {"old-bar1", Kind::kOldBar1, 1},
      {"old-ahead", Kind::kOldAhead, 1},
      {"old-pub32", Kind::kOldPub32, 1},
      {"old-ahead-pub32", Kind::kOldAheadPub32, 1},
      {"old-1warp-copy", Kind::kOld1WarpCopy, 1},
      {"new-1", Kind::kNew, 1},
      {"new-2", Kind::kNew, 2},
      {"new-4", Kind::kNew, 4},
      {"new-1-noahead", Kind::kNewNoAhead, 1},
      {"new-4-noahead", Kind::kNewNoAhead, 4},
      {"new-1-sync", Kind::kNewSync, 1},
      {"new-1-plain", Kind::kNewPlain, 1},
      {"new-1-sync-plain", Kind::kNewSyncPlain, 1},
      {"finder-2", Kind::kFinder, 2},
      {"finder-4", Kind::kFinder, 4},
  };
  constexpr int kVariants = sizeof(variants) / sizeof(variants[0]);
  // sums over the rounds: [pass][variant][0: p50, 1: p99]
  double sum[2][kVariants][2] = {};
  bool all_pass = true;
  std::printf("| round | %-16s | %-12s | %7s | %7s | %7s | %7s | %-5s |\n", "variant", "pass",
              "p10", "p50", "p90", "p99", "check");
  for (int round = 1; round <= 2; ++round) {
    for (int v = 0; v < kVariants; ++v) {
      for (const bool random_phase : {false, true}) {
        std::vector<double> us;
        bool check = true;
        if (!RunPass(c, variants[v], random_phase, us, &check)) return 1;
        all_pass = all_pass && check;
        std::sort(us.begin(), us.end());
        sum[random_phase][v][0] += Pct(us, 0.50);
        sum[random_phase][v][1] += Pct(us, 0.99);
        std::printf("| %5d | %-16s | %-12s | %7.2f | %7.2f | %7.2f | %7.2f | %-5s |\n", round,
                    variants[v].name, random_phase ? "random phase" : "back-to-back", Pct(us, 0.10),
                    Pct(us, 0.50), Pct(us, 0.90), Pct(us, 0.99), check ? "PASS" : "FAIL");
      }
    }
  }
  std::printf("\nBy variant, us, mean of 2 rounds:\n");
  std::printf("| %-16s | %10s | %10s | %10s | %10s |\n", "variant", "random p50", "random p99",
              "b2b p50", "b2b p99");
  for (int v = 0; v < kVariants; ++v)
    std::printf("| %-16s | %10.2f | %10.2f | %10.2f | %10.2f |\n", variants[v].name,
                sum[1][v][0] / 2, sum[1][v][1] / 2, sum[0][v][0] / 2, sum[0][v][1] / 2);
  std::printf("\n4KiB data checks: %s\n", all_pass ? "all PASS" : "some FAIL");
  return all_pass ? 0 : 1;
}

}  // namespace

int main() {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // lines survive an early _Exit
  return Main();
}
