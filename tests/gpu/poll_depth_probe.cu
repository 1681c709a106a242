// cuda_poll_depth_probe: does a resident responder answer sooner when it keeps
// several polls of the host doorbell in flight? One thread's poll of pinned
// host memory is a PCIe read; a request that lands just after a read passed
// waits for the next read to be issued and to come back, so one poll in
// flight costs, on average, half a round trip more than K polls issued a
// round trip / K apart. And does a READ (data pulled from the peer into this
// GPU) need the system-scope fence, or does a device-scope one order a local
// destination before the record at lower cost?
//
// A resident one-block kernel on GPU 0, 256 threads: thread 0 polls an 8-byte
// doorbell with K loads in flight (the i-th issued a measured round trip / K
// after the (i-1)-th, then each reissued as soon as it came back and was not
// the request), or K copies of the doorbell on K lines (the host writes all
// of them) in case loads of one address are serialized. Then 256 threads copy
// 4 KiB (16 B each), thread 0 fences and writes the record into pinned host
// memory. The host times request to record (round_trip.h), with the engine's
// own proxy (CudaProxy) in the same call as the reference.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstring>

#include "engine_proxy_timing.h"
#include "gpu/copy_device.cuh"
#include "round_trip.h"
#include "two_gpu_buffers.h"

namespace {

constexpr uint64_t kExit = ~0ull;
constexpr int kMaxDepth = 8;
constexpr int kLineWords = 8;  // 64-byte lines

using kvlane::gpu::LoadSys64;

__device__ __forceinline__ void SpinCycles(long long cycles) {
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
}

// bell: kMaxDepth lines (one word each used); with kMirror poll j reads line j.
// info[0]: the measured round trip of one poll, in ns (globaltimer).
template <int K, bool kMirror, bool kSysFence>
__global__ void Responder(const uint64_t* bell, uint64_t* record, const uint4* src, uint4* dst,
                          uint64_t* info) {
  __shared__ uint64_t seen;
  long long stagger = 0;
  if (threadIdx.x == 0) {
    constexpr int kSamples = 16;
    uint64_t sink = 0, ns0, ns1;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns0));
    const long long c0 = clock64();
    for (int i = 0; i < kSamples; ++i) sink += LoadSys64(bell + (sink & 1));  // dependent loads
    const long long cycles = (clock64() - c0) / kSamples;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns1));
    stagger = cycles / K;
    info[0] = (ns1 - ns0) / kSamples;
    info[1] = static_cast<uint64_t>(cycles);
    info[2] = sink;  // keeps the timed loads
  }
  for (uint64_t n = 1;; ++n) {
    if (threadIdx.x == 0) {
      uint64_t w[K];
#pragma unroll
      for (int j = 0; j < K; ++j) {
        if (j > 0) SpinCycles(stagger);
        w[j] = LoadSys64(bell + (kMirror ? j * kLineWords : 0));
      }
      uint64_t v = 0;
      bool got = false;
      while (!got) {
#pragma unroll
        for (int j = 0; j < K; ++j) {
          if (got) continue;
          if (w[j] >= n) {  // request n, or the exit word
            v = w[j];
            got = true;
          } else {
            w[j] = LoadSys64(bell + (kMirror ? j * kLineWords : 0));
          }
        }
      }
      seen = v;
    }
    __syncthreads();
    const uint64_t k = seen;
    if (k == kExit) return;
    dst[threadIdx.x] = src[threadIdx.x];
    __syncthreads();
    if (threadIdx.x == 0) {
      if (kSysFence)
        __threadfence_system();
      else
        __threadfence();
      *reinterpret_cast<volatile uint64_t*>(record) = k;
    }
    __syncthreads();
  }
}

struct Host {
  uint64_t* bell;    // pinned, mapped: kMaxDepth lines
  uint64_t* record;  // pinned, mapped: its own line
  uint64_t* info;    // pinned, mapped
};

void Ring(const Host& h, uint64_t v, int copies) {
  for (int j = 0; j < copies; ++j) __atomic_store_n(h.bell + j * kLineWords, v, __ATOMIC_RELEASE);
}

template <int K, bool kMirror, bool kSysFence>
void Run(const char* name, const Host& h, uint64_t src, uint64_t dst) {
  std::memset(h.bell, 0, kMaxDepth * kLineWords * sizeof(uint64_t));
  *h.record = 0;
  h.info[0] = h.info[1] = 0;
  const int copies = kMirror ? K : 1;
  cudaStream_t st;
  cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
  Responder<K, kMirror, kSysFence><<<1, 256, 0, st>>>(
      h.bell, h.record, reinterpret_cast<const uint4*>(src), reinterpret_cast<uint4*>(dst), h.info);
  const kvlane::test::RoundTrips r = kvlane::test::TimeRoundTrips(
      13,
      [&](uint64_t k) {
        Ring(h, k, copies);
        return std::string();
      },
      [&](uint64_t k) { return __atomic_load_n(h.record, __ATOMIC_ACQUIRE) == k; });
  Ring(h, kExit, copies);
  const cudaError_t e = cudaStreamSynchronize(st);
  cudaStreamDestroy(st);
  char note[128];
  std::snprintf(note, sizeof(note), "poll round trip %llu ns = %llu cycles; %s",
                static_cast<unsigned long long>(h.info[0]),
                static_cast<unsigned long long>(h.info[1]), cudaGetErrorString(e));
  kvlane::test::PrintRoundTrips(name, 40, r, note);
}

}  // namespace

int main() {
  const kvlane::test::TwoGpuBuffers g = kvlane::test::AllocTwoGpuBuffers();
  const int peer = g.peer;
  Host h{};
  cudaHostAlloc(&h.bell, 4096, cudaHostAllocMapped | cudaHostAllocPortable);
  cudaHostAlloc(&h.record, 4096, cudaHostAllocMapped | cudaHostAllocPortable);
  h.info = h.record + 64;
  std::printf("cuda_poll_depth_probe: 4 KiB between GPU 0 and GPU %d, request to record\n", peer);
  const uint64_t a0 = g.local, a1 = g.remote;
  for (int round = 0; round < 2; ++round) {
    Run<1, false, true>("WRITE depth 1", h, a0, a1);
    Run<2, false, true>("WRITE depth 2", h, a0, a1);
    Run<4, false, true>("WRITE depth 4", h, a0, a1);
    Run<8, false, true>("WRITE depth 8", h, a0, a1);
    Run<4, true, true>("WRITE depth 4, 4 doorbell lines", h, a0, a1);
    Run<8, true, true>("WRITE depth 8, 8 doorbell lines", h, a0, a1);
    Run<1, false, true>("READ depth 1", h, a1, a0);
    Run<4, false, true>("READ depth 4", h, a1, a0);
    Run<1, false, false>("READ depth 1, device-scope fence", h, a1, a0);
    Run<4, false, false>("READ depth 4, device-scope fence", h, a1, a0);
    kvlane::test::TimeEngineProxy("engine proxy (CudaProxy) WRITE", 40, 11, a0, a1);
    kvlane::test::TimeEngineProxy("engine proxy (CudaProxy) READ", 40, 11, a1, a0);
  }
  return 0;
}
