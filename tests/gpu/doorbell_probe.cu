// cuda_doorbell_probe: a resident kernel polls a doorbell in pinned, mapped
// host memory; on each new value k it (optionally) writes data, then publishes
// a record k to pinned host memory. Which publish instruction is cheapest while
// still ordering the data stores before the record, and does keeping D polling
// loads in flight (one per warp, staggered) still gain with it?
//
// First a kernel times 64 blocking loads of the doorbell (the round trip, RTT).
// Then per variant a kernel waits for doorbell == k, k = 1, 2, ...:
//  poll:
//   - "D=1": one warp, lane 0 polls with one load at a time.
//   - "warps D=2/4 mirror": D warps, lane 0 of each holds one load of its own
//     copy of the doorbell (a 64-byte line each); the warps take turns to
//     issue, gap = RTT / D cycles apart, each waits only for its own load; the
//     warp that sees k claims it (CAS in shared memory). (An earlier run:
//     several loads of the SAME address did worse than mirror, and one thread
//     holding D loads worse still, as ptxas puts them on one scoreboard; both
//     dropped.)
//  data, written by all 32 lanes of the warp that saw k, before publishing:
//   - "nodata": none.
//   - "4KiB": 4 KiB in 16-byte stores (32 lanes x 8 uint4, the value derived
//     from k) to a buffer on GPU 1 (peer, over NVLink), or on GPU 0 where there
//     is no peer GPU (the header says which); then __syncwarp(). At the end of
//     each such pass (untimed) the host checks the buffer holds the last k's
//     pattern: "check" PASS / FAIL.
//  publish, by lane 0 of that warp, the record store:
//   - "sc":      fence.sc.sys; st.volatile          (MEMBAR.SC.SYS)
//   - "acqrel":  fence.acq_rel.sys; st.relaxed.sys  (MEMBAR.ALL.SYS + CCTL.IVALL)
//   - "release": st.release.sys                     (MEMBAR.ALL.SYS)
//   - "none":    st.volatile, no fence: does NOT order the data; a floor.
// The host writes k to the doorbell copies and times until record == k: back
// to back, and with a random 0-3 us busy wait before each write (a random poll
// phase). All variants run twice, interleaved (round 1, 2), in one process;
// then p50 by poll x publish per data, mean of the two rounds.
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

namespace {

using Clock = std::chrono::steady_clock;

constexpr uint64_t kExit = ~0ull;  // doorbell value that ends the kernel
constexpr int kMaxCopies = 8;      // doorbell copies, one per 64-byte line
constexpr int kLineWords = 64 / sizeof(uint64_t);
constexpr int kRttSamples = 64;
constexpr int kWarmup = 200;
constexpr int kIters = 2000;
constexpr int kDataBytes = 4096;
constexpr int kDataPerLane = kDataBytes / 16 / 32;  // uint4 stores per lane
constexpr unsigned kFullMask = 0xffffffffu;
constexpr auto kTimeout = std::chrono::seconds(1);

enum class Publish { kSc, kAcqRel, kRelease, kNone };
constexpr Publish kPublishes[] = {Publish::kSc, Publish::kAcqRel, Publish::kRelease,
                                  Publish::kNone};
constexpr const char* kPublishNames[] = {"sc", "acqrel", "release", "none"};

bool Ok(cudaError_t e, const char* what, int line) {
  if (e != cudaSuccess)
    std::fprintf(stderr, "line %d: %s: %s\n", line, what, cudaGetErrorString(e));
  return e == cudaSuccess;
}
#define CUDA_OK(call) Ok((call), #call, __LINE__)

__device__ __forceinline__ uint64_t LoadSys(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.relaxed.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ uint64_t GlobalTimerNs() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// The pattern for doorbell k, uint4 number i of the data buffer (host too).
__host__ __device__ __forceinline__ uint4 DataWord(uint64_t k, unsigned i) {
  const auto lo = static_cast<unsigned>(k), hi = static_cast<unsigned>(k >> 32);
  return make_uint4(lo, hi, i, lo ^ 0x9e3779b9u ^ (i << 16));
}

// Lane `lane` writes its 8 of the 256 uint4 (coalesced: uint4 j * 32 + lane).
__device__ __forceinline__ void WriteData(uint4* data, uint64_t k, unsigned lane) {
#pragma unroll
  for (int j = 0; j < kDataPerLane; ++j) {
    const unsigned i = j * 32 + lane;
    data[i] = DataWord(k, i);
  }
}

// The record store. The data stores of the other lanes are ordered before it
// by the __syncwarp() before (a barrier orders memory among its threads) and
// the cumulativity of the fence / release.
template <Publish P>
__device__ __forceinline__ void WriteRecord(uint64_t* record, uint64_t k) {
  if constexpr (P == Publish::kSc) {
    asm volatile("fence.sc.sys;\n\tst.volatile.global.u64 [%0], %1;" ::"l"(record), "l"(k)
                 : "memory");
  } else if constexpr (P == Publish::kAcqRel) {
    asm volatile("fence.acq_rel.sys;\n\tst.relaxed.sys.global.u64 [%0], %1;" ::"l"(record), "l"(k)
                 : "memory");
  } else if constexpr (P == Publish::kRelease) {
    asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(record), "l"(k) : "memory");
  } else {
    asm volatile("st.volatile.global.u64 [%0], %1;" ::"l"(record), "l"(k) : "memory");
  }
}

// Times kRttSamples blocking loads of *bell; cycles[j] per load (device memory),
// *total_ns the whole run by the global timer.
__global__ void RoundTrip(const uint64_t* bell, uint64_t* cycles, uint64_t* total_ns) {
  __shared__ volatile uint64_t sink;  // the store waits for the load before the clock read
  const uint64_t g0 = GlobalTimerNs();
  for (int j = 0; j < kRttSamples; ++j) {
    const uint64_t t0 = clock64();
    sink = LoadSys(bell);
    cycles[j] = clock64() - t0;
  }
  *total_ns = GlobalTimerNs() - g0;
}

__device__ __forceinline__ void SpinUntil(uint64_t last_issue, uint64_t gap) {
  while (static_cast<uint64_t>(clock64()) - last_issue < gap) {
  }
}

// One warp (blockDim.x = 32): lane 0 waits for bells[0] to reach k = 1, 2, ...,
// one load at a time, while the other lanes wait at the shuffle; then the warp
// writes the data (kData) and lane 0 the record k. Returns on kExit.
template <Publish P, bool kData>
__global__ void PollOne(const uint64_t* bells, uint64_t* record, uint4* data) {
  const unsigned lane = threadIdx.x % 32;
  for (uint64_t k = 1;; ++k) {
    uint64_t got = 0;
    if (lane == 0) {
      do {
        got = LoadSys(bells);
      } while (got < k);  // kExit is >= any k
    }
    got = __shfl_sync(kFullMask, got, 0);
    if (got == kExit) return;
    if constexpr (kData) WriteData(data, k, lane);
    __syncwarp();
    if (lane == 0) WriteRecord<P>(record, k);
  }
}

// D warps (blockDim.x = 32 * D), lane 0 of each holds one load of its own copy
// bells[slot * kLineWords]: the warps issue in turn (`turn`), each not before
// gap after the latest issue of any; the warp that sees k claims it (CAS on
// next_k), writes the data (all its lanes, kData) and the record (lane 0).
template <Publish P, bool kData>
__global__ void PollWarps(const uint64_t* bells, uint64_t* record, uint4* data, uint64_t gap) {
  __shared__ unsigned long long next_k;  // the value awaited
  __shared__ uint64_t last_issue;        // clock64 of the latest issue, any warp
  __shared__ int turn;                   // the slot that issues next
  __shared__ int stop;                   // a warp saw kExit
  if (threadIdx.x == 0) next_k = 1, last_issue = 0, turn = 0, stop = 0;
  __syncthreads();
  const unsigned lane = threadIdx.x % 32;
  const int slot = threadIdx.x / 32, depth = blockDim.x / 32;
  volatile int& v_turn = turn;
  volatile int& v_stop = stop;
  volatile uint64_t& v_last = last_issue;
  const uint64_t* bell = bells + slot * kLineWords;
  for (;;) {
    unsigned long long claimed = 0;  // the k this warp claimed, or kExit
    if (lane == 0) {
      while (claimed == 0) {
        if (v_stop != 0) {
          claimed = kExit;
          break;
        }
        if (v_turn != slot) continue;
        SpinUntil(v_last, gap);
        // Hand the turn on first: ptxas hoists the first use of `got` (and its
        // wait for the load) above any later independent instruction.
        v_last = clock64();
        v_turn = (slot + 1) % depth;
        const uint64_t got = LoadSys(bell);
        if (got == kExit) {
          v_stop = 1;
          claimed = kExit;
          break;
        }
        const unsigned long long k = *static_cast<volatile unsigned long long*>(&next_k);
        if (got >= k && atomicCAS(&next_k, k, k + 1) == k) claimed = k;
      }
    }
    claimed = __shfl_sync(kFullMask, claimed, 0);
    if (claimed == kExit) return;
    if constexpr (kData) WriteData(data, claimed, lane);
    __syncwarp();
    if (lane == 0) WriteRecord<P>(record, claimed);
  }
}

struct Variant {
  const char* name;
  int depth;   // D, loads in flight
  bool warps;  // PollWarps, else PollOne
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

template <Publish P, bool kData>
void LaunchAs(Ctx& c, const Variant& var, uint64_t gap) {
  uint4* const d = kData ? c.data : nullptr;
  if (var.warps)
    PollWarps<P, kData><<<1, 32 * var.depth, 0, c.stream>>>(c.dev_bells, c.dev_record, d, gap);
  else
    PollOne<P, kData><<<1, 32, 0, c.stream>>>(c.dev_bells, c.dev_record, d);
}

template <Publish P>
void LaunchP(Ctx& c, const Variant& var, bool data, uint64_t gap) {
  if (data)
    LaunchAs<P, true>(c, var, gap);
  else
    LaunchAs<P, false>(c, var, gap);
}

bool Launch(Ctx& c, const Variant& var, Publish pub, bool data) {
  const uint64_t gap = var.depth == 1 ? 0 : c.rtt_cycles / var.depth;
  switch (pub) {
    case Publish::kSc:
      LaunchP<Publish::kSc>(c, var, data, gap);
      break;
    case Publish::kAcqRel:
      LaunchP<Publish::kAcqRel>(c, var, data, gap);
      break;
    case Publish::kRelease:
      LaunchP<Publish::kRelease>(c, var, data, gap);
      break;
    case Publish::kNone:
      LaunchP<Publish::kNone>(c, var, data, gap);
      break;
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
// With data, clears the buffer first and sets *check to whether it ends with the
// last k's pattern. Exits the process if the kernel neither answers nor stops.
bool RunPass(Ctx& c, const Variant& var, Publish pub, bool data, bool random_phase,
             std::vector<double>& us, bool* check) {
  if (data) {
    const std::vector<char> zeros(kDataBytes, 0);
    if (!CUDA_OK(cudaMemcpy(c.data, zeros.data(), kDataBytes, cudaMemcpyDefault))) return false;
  }
  WriteBells(c, 0, kMaxCopies);
  *reinterpret_cast<volatile uint64_t*>(c.record) = 0;
  if (!Launch(c, var, pub, data)) return false;
  const int copies = var.depth;  // D=1 polls copy 0; warp i polls copy i
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
        std::fprintf(stderr, "cuda_doorbell_probe: %s %s: no record %llu within 1 s\n", var.name,
                     kPublishNames[static_cast<int>(pub)], static_cast<unsigned long long>(k));
        if (!StopKernel(c)) std::_Exit(2);
        return false;
      }
    }
    const Clock::time_point t1 = Clock::now();
    if (k > kWarmup) us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  if (!StopKernel(c)) std::_Exit(2);
  *check = !data || CheckData(c, kLast);
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
      "gap (cycles) D=2: %llu, D=4: %llu. Latency: host write of k -> host sees record k, us.\n",
      static_cast<unsigned long long>(c.rtt_cycles / 2),
      static_cast<unsigned long long>(c.rtt_cycles / 4));
  const Variant variants[] = {
      {"D=1", 1, false}, {"warps D=2 mirror", 2, true}, {"warps D=4 mirror", 4, true}};
  constexpr int kVariants = sizeof(variants) / sizeof(variants[0]);
  constexpr int kPubs = sizeof(kPublishes) / sizeof(kPublishes[0]);
  // p50 sums over the rounds: [data][pass][variant][publish]
  double p50_sum[2][2][kVariants][kPubs] = {};
  bool all_pass = true;
  std::printf("| round | %-16s | %-7s | %-6s | %-12s | %7s | %7s | %7s | %7s | %-5s |\n", "poll",
              "publish", "data", "pass", "p10", "p50", "p90", "p99", "check");
  for (int round = 1; round <= 2; ++round) {
    for (int data = 0; data < 2; ++data) {
      for (int v = 0; v < kVariants; ++v) {
        for (int p = 0; p < kPubs; ++p) {
          for (const bool random_phase : {false, true}) {
            std::vector<double> us;
            bool check = true;
            if (!RunPass(c, variants[v], kPublishes[p], data != 0, random_phase, us, &check))
              return 1;
            all_pass = all_pass && check;
            std::sort(us.begin(), us.end());
            p50_sum[data][random_phase][v][p] += Pct(us, 0.50);
            std::printf(
                "| %5d | %-16s | %-7s | %-6s | %-12s | %7.2f | %7.2f | %7.2f | %7.2f | %-5s |\n",
                round, variants[v].name, kPublishNames[p], data ? "4KiB" : "nodata",
                random_phase ? "random phase" : "back-to-back", Pct(us, 0.10), Pct(us, 0.50),
                Pct(us, 0.90), Pct(us, 0.99), data ? (check ? "PASS" : "FAIL") : "-");
          }
        }
      }
    }
  }
  for (const int random_phase : {1, 0}) {
    for (int data = 0; data < 2; ++data) {
      std::printf("\np50 (us), %s, data %s, mean of 2 rounds:\n",
                  random_phase ? "random phase" : "back-to-back", data ? "4KiB" : "nodata");
      std::printf("| %-16s |", "poll");
      for (int p = 0; p < kPubs; ++p) std::printf(" %7s |", kPublishNames[p]);
      std::printf("\n");
      for (int v = 0; v < kVariants; ++v) {
        std::printf("| %-16s |", variants[v].name);
        for (int p = 0; p < kPubs; ++p)
          std::printf(" %7.2f |", p50_sum[data][random_phase][v][p] / 2);
        std::printf("\n");
      }
    }
  }
  std::printf("\n4KiB data checks: %s\n", all_pass ? "all PASS" : "some FAIL");
  return all_pass ? 0 : 1;
}

}  // namespace

int main() { return Main(); }
