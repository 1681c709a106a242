// cuda_proxy_phase_probe: where, inside the GPU, does the engine's proxy
// kernel spend the time it takes beyond a minimal resident responder (about
// 1 us per 4 KiB request, session 8's cuda_poll_depth_probe: 4.3 against 3.3
// us request to record)? This file compiles the engine's own proxy kernel
// (gpu/proxy_kernel.cu) with its phase hook defined: thread 0 of block 0 reads
// the SM clock at each phase of an entry, and the sums come back per phase:
//   poll wait  from the start of the entry's poll to the poll that saw it;
//   polls      how many polls that took (one PCIe round trip each, or more);
//   decide     from that poll's data to Poll's return (flags, Agree, checks);
//   bcast      to all threads past the barrier that hands the entry over;
//   copy       to thread 0's part of the copy done;
//   gather     to all threads past Finish's barrier;
//   publish    to the record and completion word stored (the system fence);
//   next       to all threads past the loop's last barrier.
// A minimal responder (one 8-byte doorbell, 256 threads copy 16 B, a fence, a
// record) reports the same phases where it has them. Both serve 4 KiB
// requests from GPU 0 to GPU 1 (WRITE) and back (READ), timed on the host from
// request to record (round_trip.h).
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>

#include "proxy_host_side.h"
#include "proxy_ring_write.h"
#include "round_trip.h"
#include "two_gpu_buffers.h"

namespace {

enum Phase {
  kPolled = 0,
  kDecided,
  kBcast,
  kCopied,
  kGathered,
  kPublished,
  kNext,
  kPollStart,
  kStart,
  kNumPhases
};

struct Marks {
  long long stamp[kNumPhases];
  unsigned long long sum[kNumPhases];  // cycles from kPolled to each later phase; [0]: poll wait
  unsigned long long polls, entries, cycles, ns;
  unsigned long long cur_polls, gt0;
};

}  // namespace

// Kept in shared memory (a mark costs ~30 cycles, not an L2 round trip) and
// copied out, with plain stores, at the end of every entry.
__shared__ Marks s_marks;
__device__ Marks g_marks;

__device__ __forceinline__ unsigned long long ProbeGlobalTimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Thread 0 of block 0 only.
__device__ __forceinline__ void ProbeMark(int phase) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  Marks& m = s_marks;
  if (phase == kStart) {
    m = Marks{};
    return;
  }
  const long long now = clock64();
  m.stamp[phase] = now;
  if (phase == kPollStart) {
    m.cur_polls = 0;
    m.gt0 = ProbeGlobalTimer();
  } else if (phase == kPolled) {
    ++m.cur_polls;
  } else if (phase == kNext) {
    m.sum[0] += m.stamp[kPolled] - m.stamp[kPollStart];
    for (int i = kDecided; i <= kNext; ++i) m.sum[i] += m.stamp[i] - m.stamp[kPolled];
    m.polls += m.cur_polls;
    m.cycles += now - m.stamp[kPollStart];
    m.ns += ProbeGlobalTimer() - m.gt0;
    ++m.entries;
    g_marks = m;
  }
}

#define KVLANE_PROXY_MARK(phase) ::ProbeMark(phase)
#define LaunchProxy LaunchProxyMarked
#include "gpu/proxy_kernel.cu"
#undef LaunchProxy

namespace {

constexpr uint64_t kExit = ~0ull;

__global__ void Minimal(const uint64_t* bell, uint64_t* record, const uint4* src, uint4* dst) {
  __shared__ uint64_t seen;
  ProbeMark(kStart);
  for (uint64_t n = 1;; ++n) {
    if (threadIdx.x == 0) {
      ProbeMark(kPollStart);
      uint64_t v;
      for (;;) {
        v = kvlane::gpu::LoadSys64(bell);
        const bool got = v >= n;  // the mark below waits for the load
        ProbeMark(kPolled);
        if (got) break;
      }
      seen = v;
      ProbeMark(kDecided);
    }
    __syncthreads();
    ProbeMark(kBcast);
    const uint64_t k = seen;
    if (k == kExit) return;
    dst[threadIdx.x] = src[threadIdx.x];
    ProbeMark(kCopied);
    __syncthreads();
    ProbeMark(kGathered);
    if (threadIdx.x == 0) {
      __threadfence_system();
      *reinterpret_cast<volatile uint64_t*>(record) = k;
      ProbeMark(kPublished);
    }
    __syncthreads();
    ProbeMark(kNext);
  }
}

void PrintMarks(const char* name, const kvlane::test::RoundTrips& r, const char* err) {
  Marks m{};
  cudaMemcpyFromSymbol(&m, g_marks, sizeof(m));
  kvlane::test::PrintRoundTrips(name, 36, r, err);
  if (m.entries == 0) return;
  const double ns_per_cycle = m.cycles ? static_cast<double>(m.ns) / m.cycles : 0;
  auto ns = [&](unsigned long long cycles) { return cycles * ns_per_cycle / m.entries; };
  std::printf("  GPU, ns per entry (mean of %llu): poll wait %.0f (%.2f polls)", m.entries,
              ns(m.sum[0]), static_cast<double>(m.polls) / m.entries);
  const char* names[] = {"", "decide", "bcast", "copy", "gather", "publish", "next"};
  double prev = 0;
  for (int i = kDecided; i <= kNext; ++i) {
    std::printf("  %s +%.0f", names[i], ns(m.sum[i]) - prev);
    prev = ns(m.sum[i]);
  }
  std::printf("  (%.3f ns/cycle)\n", ns_per_cycle);
}

void ResetMarks() {
  Marks zero{};
  cudaMemcpyToSymbol(g_marks, &zero, sizeof(zero));
}

void RunMinimal(const char* name, uint64_t* bell, uint64_t* record, uint64_t src, uint64_t dst) {
  ResetMarks();
  *bell = 0;
  *record = 0;
  cudaStream_t st;
  cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
  Minimal<<<1, 256, 0, st>>>(bell, record, reinterpret_cast<const uint4*>(src),
                             reinterpret_cast<uint4*>(dst));
  const kvlane::test::RoundTrips r = kvlane::test::TimeRoundTrips(
      17,
      [&](uint64_t k) {
        __atomic_store_n(bell, k, __ATOMIC_RELEASE);
        return std::string();
      },
      [&](uint64_t k) { return __atomic_load_n(record, __ATOMIC_ACQUIRE) == k; });
  __atomic_store_n(bell, kExit, __ATOMIC_RELEASE);
  const cudaError_t e = cudaStreamSynchronize(st);
  cudaStreamDestroy(st);
  PrintMarks(name, r, cudaGetErrorString(e));
}

// The engine's kernel (one block of `threads`, generation 1, no max life),
// driven as CudaProxy::Write drives it: entry n has ready = n + 1, a check,
// the record of slot 0 with generation n + 1, and op `op`.
void RunEngine(const char* name, uint64_t src, uint64_t dst, int threads, uint16_t op) {
  using namespace kvlane::gpu;
  ResetMarks();
  const kvlane::test::ProxyHostSide host(4);
  ProxyEntry* const ring = host.ring;
  ProxyCtl* const ctl = host.ctl;
  uint64_t* const done = host.done;
  uint8_t* const records = host.records;
  ProxyScratch* scratch = nullptr;
  cudaMalloc(&scratch, sizeof(ProxyScratch));
  cudaMemset(scratch, 0, sizeof(ProxyScratch));
  cudaStream_t st;
  cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
  ProxyChain* chain = nullptr;  // zeroed: the launch starts from the record given
  cudaMalloc(&chain, sizeof(*chain));
  cudaMemset(chain, 0, sizeof(*chain));
  const ProxyArgs args{ring, ctl, done, scratch, 1, 0, records, 4, chain, PackTagged(0, 0, false),
                       1};
  kvlane::gpu::ProxyKernel<<<1, threads, 0, st>>>(args);
  cudaError_t e = cudaGetLastError();
  auto write = [&](uint64_t n, uint16_t op, uint32_t gen) {
    kvlane::test::WriteProxyEntry(ring, n, op, gen, src, dst, 4096);
  };
  const auto* record = reinterpret_cast<const uint64_t*>(records);
  kvlane::test::RoundTrips r;
  if (e == cudaSuccess) {
    r = kvlane::test::TimeRoundTrips(
        17,
        [&](uint64_t k) {
          write(k - 1, op, static_cast<uint32_t>(k));
          return std::string();
        },
        [&](uint64_t k) { return __atomic_load_n(record, __ATOMIC_ACQUIRE) == k << 32; });
    write(r.issued, kProxyExit, 0);
    e = cudaStreamSynchronize(st);
  }
  cudaStreamDestroy(st);
  cudaFree(scratch);
  cudaFree(chain);
  PrintMarks(name, r, cudaGetErrorString(e));
}

}  // namespace

int main() {
  const kvlane::test::TwoGpuBuffers g = kvlane::test::AllocTwoGpuBuffers();
  const int peer = g.peer;
  uint64_t* host = nullptr;
  cudaHostAlloc(&host, 4096, cudaHostAllocMapped | cudaHostAllocPortable);
  uint64_t *bell = host, *record = host + 16;
  std::printf("cuda_proxy_phase_probe: 4 KiB between GPU 0 and GPU %d, request to record\n", peer);
  const uint64_t a0 = g.local, a1 = g.remote;
  for (int round = 0; round < 2; ++round) {
    using kvlane::gpu::kProxyCopy, kvlane::gpu::kProxyCopyLocal;
    RunMinimal("minimal WRITE", bell, record, a0, a1);
    constexpr int kT = kvlane::gpu::kProxyThreads;
    RunEngine("engine kernel WRITE", a0, a1, kT, kProxyCopy);
    RunEngine("engine kernel WRITE, 256 threads", a0, a1, 256, kProxyCopy);
    RunMinimal("minimal READ", bell, record, a1, a0);
    RunEngine("engine kernel READ", a1, a0, kT, kProxyCopyLocal);
    RunEngine("engine kernel READ, system fence", a1, a0, kT, kProxyCopy);
  }
  return 0;
}
