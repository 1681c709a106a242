// cuda_proxy_shape_probe: where does the engine's proxy kernel spend the ~0.9
// us it takes beyond a minimal resident responder (session 7,
// cuda_push_read_probe: Submit to record 4.1-4.4 us for a 4 KiB WRITE, against
// 3.2-3.3 for one thread polling a doorbell, 256 threads copying, a fence and
// a record)? A resident one-block kernel on GPU 0 waits for request k, copies
// 4 KiB to GPU 1 (peer access), fences at system scope and writes record k
// into pinned host memory; the host times its request to seeing the record,
// with a random 0-3 us wait before each. The shapes add the engine's features
// one at a time:
//  - threads: 256 or 1024 (the proxy's block; 256 of them copy 4 KiB);
//  - the request: an 8-byte doorbell, or a 64-byte ring entry (a new line per
//    request, kRing of them) written by the host fields first and `ready`
//    last, read by lanes 0-7 of warp 0 (one 8-byte word each) while lanes
//    8-11 read a 16-byte control line, then shuffled (the engine's Poll);
//  - the publication: the record alone, or the record and a completion word
//    on another line behind the same fence (the engine's StoreRecordAndDone).
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "engine_proxy_timing.h"
#include "gpu/copy_device.cuh"
#include "gpu/copy_types.h"
#include "proxy_ring_write.h"
#include "round_trip.h"
#include "two_gpu_buffers.h"

namespace {

constexpr uint64_t kExit = ~0ull;
constexpr uint32_t kRing = 1024;

struct alignas(64) Entry {
  uint64_t ready;  // request number; written last
  uint64_t src, dst, len, value, gen, check, pad;
};

struct Shared {
  Entry* ring;        // pinned host (mapped): kRing entries
  uint32_t* ctl;      // pinned host (mapped): 16 bytes (the engine's flags)
  uint64_t* bell;     // pinned host (mapped): doorbell shape
  uint64_t* record;   // pinned host (mapped)
  uint64_t* done;     // pinned host (mapped): another line
  uint64_t src, dst;  // the doorbell shape's copy (kernel parameters)
};

// One poll of warp 0 as the engine's Poll made it (session 7): lanes 0-7 read
// the ring entry's eight words into `words`, lanes 8-11 the 16-byte flags
// line; returns the first flag (the host latch) in every lane.
__device__ __forceinline__ uint32_t PollWords(const uint64_t* src, const uint32_t* ctl,
                                              unsigned lane, uint64_t* words) {
  uint64_t w = 0;
  uint32_t f = 0;
  if (lane < 8)
    w = kvlane::gpu::LoadSys64(src + lane);
  else if (lane < 12)
    f = kvlane::gpu::LoadSys32(ctl + (lane - 8));
  const uint32_t latched = __shfl_sync(0xffffffffu, f, 8);
  if (lane < 8) words[lane] = w;
  __syncwarp();
  return latched;
}

template <bool kEntry, bool kTwoStores>
__global__ void Responder(Shared s) {
  __shared__ uint64_t words[8];
  __shared__ uint64_t k_seen;
  for (uint64_t n = 1;; ++n) {
    if (threadIdx.x < 32) {
      const unsigned lane = threadIdx.x;
      if (kEntry) {
        const auto* src = reinterpret_cast<const uint64_t*>(&s.ring[n % kRing]);
        for (;;) {
          const uint32_t latched = PollWords(src, s.ctl, lane, words);
          const bool here = words[0] == n || words[0] == kExit;
          if (here && latched == 0) break;
        }
        if (lane == 0) k_seen = words[0];
      } else if (lane == 0) {
        uint64_t v;
        while ((v = kvlane::gpu::LoadSys64(s.bell)) != n && v != kExit) {
        }
        k_seen = v;
      }
    }
    __syncthreads();
    const uint64_t k = k_seen;
    if (k == kExit) return;
    if (threadIdx.x < 256) {
      const uint4* src = kEntry ? reinterpret_cast<const uint4*>(words[1]) : nullptr;
      uint4* dst = kEntry ? reinterpret_cast<uint4*>(words[2]) : nullptr;
      if (!kEntry) {
        src = reinterpret_cast<const uint4*>(s.src);
        dst = reinterpret_cast<uint4*>(s.dst);
      }
      dst[threadIdx.x] = src[threadIdx.x];
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      __threadfence_system();
      *reinterpret_cast<volatile uint64_t*>(s.record) = k;
      if (kTwoStores) *reinterpret_cast<volatile uint64_t*>(s.done) = k;
    }
    __syncthreads();
  }
}

// The engine's ring entry (gpu::ProxyEntry: ready = n + 1, a check of the
// fields), polled as the engine's Poll does, then: kGeneric: the copy through
// the engine's CopyRange (rank over all threads, head, unrolled body, tail)
// instead of one uint4 per thread of 256; kTimer: %globaltimer read at every
// 16th poll (the engine's max-life clock); record and completion word behind
// one fence (StoreRecordAndDone); a block barrier after each entry.
template <bool kGeneric, bool kTimer>
__global__ void __launch_bounds__(1024)
    EngineLike(const kvlane::gpu::ProxyEntry* ring, const uint32_t* ctl, uint64_t* record,
               uint64_t* done) {
  __shared__ kvlane::gpu::ProxyEntry entry;
  __shared__ int cmd;
  uint32_t tick = 0;
  uint64_t t_acc = 0;
  for (uint64_t n = 0;; ++n) {
    if (threadIdx.x < 32) {
      const unsigned lane = threadIdx.x;
      const auto* src = reinterpret_cast<const uint64_t*>(&ring[n % kvlane::gpu::kProxyRing]);
      auto* words = reinterpret_cast<uint64_t*>(&entry);
      for (;;) {
        const uint32_t latched = PollWords(src, ctl, lane, words);
        const bool here = entry.ready == n + 1 && entry.check == kvlane::gpu::ProxyCheck(entry);
        int rc = here ? 0 : -1;
        if (kTimer && lane == 0 && (tick++ & 15) == 0) {
          uint64_t t;
          asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
          t_acc += t;
        }
        rc = __shfl_sync(0xffffffffu, rc, 0);
        if (rc != 0 || latched != 0) continue;
        if (lane == 0) cmd = entry.op == kvlane::gpu::kProxyExit ? 2 : 0;
        break;
      }
    }
    __syncthreads();
    if (cmd == 2) {
      if (threadIdx.x == 0 && t_acc == 1) *done = 0;  // keeps t_acc alive
      return;
    }
    if (kGeneric) {
      kvlane::gpu::CopyRange(entry.seg.dst, entry.seg.src, entry.seg.len, threadIdx.x, blockDim.x);
    } else if (threadIdx.x < 256) {
      reinterpret_cast<uint4*>(entry.seg.dst)[threadIdx.x] =
          reinterpret_cast<const uint4*>(entry.seg.src)[threadIdx.x];
    }
    __syncthreads();
    if (threadIdx.x == 0)
      kvlane::gpu::StoreRecordAndDone(record, uint64_t{entry.gen} << 32,
                                      &done[(entry.value - 1) % kvlane::gpu::kProxyRing],
                                      entry.value);
    __syncthreads();
  }
}

template <bool kEntry, bool kTwoStores>
void Run(const char* name, int threads, Shared s, uint64_t src, uint64_t dst) {
  std::memset(s.ring, 0, kRing * sizeof(Entry));
  *s.bell = 0;
  *s.record = 0;
  s.src = src;
  s.dst = dst;
  cudaStream_t st;
  cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
  Responder<kEntry, kTwoStores><<<1, threads, 0, st>>>(s);
  const kvlane::test::RoundTrips r = kvlane::test::TimeRoundTrips(
      11,
      [&](uint64_t k) {
        if (kEntry) {
          Entry& e = s.ring[k % kRing];
          Entry full{k, src, dst, 4096, k, k, k * 7, 0};
          std::memcpy(reinterpret_cast<char*>(&e) + 8, reinterpret_cast<const char*>(&full) + 8,
                      sizeof(Entry) - 8);
          __atomic_store_n(&e.ready, k, __ATOMIC_RELEASE);
        } else {
          __atomic_store_n(s.bell, k, __ATOMIC_RELEASE);
        }
        return std::string();
      },
      [&](uint64_t k) { return __atomic_load_n(s.record, __ATOMIC_ACQUIRE) == k; });
  if (kEntry)
    __atomic_store_n(&s.ring[(r.issued + 1) % kRing].ready, kExit, __ATOMIC_RELEASE);
  else
    __atomic_store_n(s.bell, kExit, __ATOMIC_RELEASE);
  const cudaError_t e = cudaStreamSynchronize(st);
  cudaStreamDestroy(st);
  kvlane::test::PrintRoundTrips(name, 44, r, cudaGetErrorString(e));
}

// EngineLike<kGeneric, kTimer> driven as CudaProxy::Write drives the engine's.
template <bool kGeneric, bool kTimer>
void RunEngineLike(const char* name, uint64_t src, uint64_t dst, const uint32_t* ctl) {
  kvlane::gpu::ProxyEntry* ring = nullptr;
  uint64_t *done = nullptr, *record = nullptr;
  cudaHostAlloc(&ring, kvlane::gpu::kProxyRing * sizeof(kvlane::gpu::ProxyEntry),
                cudaHostAllocMapped | cudaHostAllocPortable);
  cudaHostAlloc(&done, kvlane::gpu::kProxyRing * sizeof(uint64_t),
                cudaHostAllocMapped | cudaHostAllocPortable);
  cudaHostAlloc(&record, 64, cudaHostAllocMapped | cudaHostAllocPortable);
  std::memset(ring, 0, kvlane::gpu::kProxyRing * sizeof(kvlane::gpu::ProxyEntry));
  *record = 0;
  cudaStream_t st;
  cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
  EngineLike<kGeneric, kTimer><<<1, 1024, 0, st>>>(ring, ctl, record, done);
  auto write = [&](uint64_t n, uint16_t op, uint32_t gen) {
    kvlane::test::WriteProxyEntry(ring, n, op, gen, src, dst, 4096);
  };
  // Request k is ring entry k - 1 (the engine's numbering), its record generation k.
  const kvlane::test::RoundTrips r = kvlane::test::TimeRoundTrips(
      11,
      [&](uint64_t k) {
        write(k - 1, kvlane::gpu::kProxyCopy, static_cast<uint32_t>(k));
        return std::string();
      },
      [&](uint64_t k) { return __atomic_load_n(record, __ATOMIC_ACQUIRE) == k << 32; });
  write(r.issued, kvlane::gpu::kProxyExit, 0);
  const cudaError_t e = cudaStreamSynchronize(st);
  cudaStreamDestroy(st);
  cudaFreeHost(ring);
  cudaFreeHost(done);
  cudaFreeHost(record);
  kvlane::test::PrintRoundTrips(name, 44, r, cudaGetErrorString(e));
}

}  // namespace

int main() {
  const kvlane::test::TwoGpuBuffers g = kvlane::test::AllocTwoGpuBuffers();
  const int peer = g.peer;
  Shared s{};
  cudaHostAlloc(&s.ring, kRing * sizeof(Entry), cudaHostAllocMapped | cudaHostAllocPortable);
  cudaHostAlloc(&s.ctl, 4096, cudaHostAllocMapped | cudaHostAllocPortable);
  cudaHostAlloc(&s.bell, 4096, cudaHostAllocMapped | cudaHostAllocPortable);
  std::memset(s.ctl, 0, 4096);
  s.record = s.bell + 16;  // other lines than the doorbell's
  s.done = s.bell + 32;
  std::printf("cuda_proxy_shape_probe: 4 KiB GPU 0 -> GPU %d, request to record\n", peer);
  const uint64_t src = g.local, dst = g.remote;
  for (int round = 0; round < 2; ++round) {
    Run<false, false>("doorbell, 256 threads, record", 256, s, src, dst);
    Run<false, false>("doorbell, 1024 threads, record", 1024, s, src, dst);
    Run<false, true>("doorbell, 1024 threads, record + done", 1024, s, src, dst);
    Run<true, false>("ring entry + flags, 1024 threads, record", 1024, s, src, dst);
    Run<true, true>("ring entry + flags, 1024 threads, record + done", 1024, s, src, dst);
    Run<true, true>("ring entry + flags, 256 threads, record + done", 256, s, src, dst);
    RunEngineLike<false, false>("engine entry, simple copy", src, dst, s.ctl);
    RunEngineLike<true, false>("engine entry, engine CopyRange", src, dst, s.ctl);
    RunEngineLike<true, true>("engine entry, engine CopyRange, timer", src, dst, s.ctl);
    RunEngineLike<true, true>("engine entry, CopyRange, timer, READ", dst, src, s.ctl);
    kvlane::test::TimeEngineProxy("engine proxy (CudaProxy)", 44, 11, src, dst);
    kvlane::test::TimeEngineProxy("engine proxy (CudaProxy), READ direction", 44, 11, dst, src);
    Run<false, false>("doorbell, 256 threads, record, READ direction", 256, s, dst, src);
  }
  return 0;
}
