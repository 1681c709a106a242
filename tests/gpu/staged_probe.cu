// cuda_staged_probe: can a scattered list cross NVLink at the copy engine's
// rate if it is staged? The list is Scattered's of cuda_bench: 6,146
// descriptors of 37,440 B between shuffled slots of a pool on each GPU.
//
// Direct (the engine today): one kernel on GPU 0 (the initiator) pushes every
// descriptor to GPU 1 (WRITE) or pulls it from there (READ): SM-issued NVLink
// traffic, ~0.92 / 0.88 of the copy engine in sessions 2-6.
//
// Staged: the list is cut into chunks of `m` descriptors. Per chunk, a kernel on
// the source GPU gathers the descriptors into a contiguous staging slot (local
// HBM), the copy engine moves the slot to a staging slot on the destination GPU
// (cudaMemcpyPeerAsync on the initiator's stream), and a kernel on the
// destination GPU scatters it into place (local HBM). Three streams, events
// between them; a ring of `k` slots per side (a slot is reused once the stage
// after it let go). The host times from the first launch to the scatter
// stream's end.
//
// WRITE: source GPU 0, destination GPU 1; READ: the reverse, the copy still
// issued on GPU 0 (the initiator). Reference: cudaMemcpyPeerAsync of the same
// bytes contiguous, same direction, synchronized from the host, measured in the
// same run (p50 of 10 after 3 warm-ups, for each row). Each staged shape is
// verified once: every destination descriptor equals its source (PASS/FAIL).
//
// Also: "ce chunks" (the copy engine alone over the same chunks, contiguous)
// and "gather" / "scatter" alone, to split the time.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "gpu/copy_device.cuh"
#include "gpu/copy_launch.h"
#include "percentile.h"

namespace {

using Clock = std::chrono::steady_clock;

constexpr uint64_t kN = 6146, kD = 37440;
constexpr int kThreads = 512, kUnroll = 4;
constexpr uint64_t kMaxChunks = 128;  // kN / the smallest chunk

struct Seg {
  uint64_t src, dst, len;
};

#define CK(x)                                                                                 \
  do {                                                                                        \
    cudaError_t e_ = (x);                                                                     \
    if (e_ != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                           \
    }                                                                                         \
  } while (0)

// One block per segment of segs[begin, begin + gridDim.x); 16-byte aligned.
// T threads, U 16-byte loads in flight per thread before its stores. kFence:
// ends like the engine's copy kernel (a system fence per block, then a block
// barrier and a count of finished blocks), to see what that costs.
// How a block ends: nothing; or like the engine's copy kernel, a fence, a
// block barrier and a count of finished blocks (the last one fences at system
// scope, as the engine's does before its done word). The per-block fence:
// fence.sc.sys (__threadfence_system, the engine's), fence.sc.gpu
// (__threadfence) or fence.acq_rel.gpu.
enum End { kNone, kSys, kGpuSc, kGpuAcqRel };

__device__ __forceinline__ void EndBlock(End end, unsigned* finished) {
  if (end == kNone) return;
  if (end == kSys) __threadfence_system();
  if (end == kGpuSc) __threadfence();
  if (end == kGpuAcqRel) asm volatile("fence.acq_rel.gpu;" ::: "memory");
  __syncthreads();
  if (threadIdx.x == 0 && atomicAdd(finished, 1u) == gridDim.x - 1) {
    __threadfence_system();
    *finished = 0;
  }
}

// The engine's loop (gpu/copy_device.cuh CopyRange), with the thread count
// read at run time (as the engine passes blockDim.x) or fixed at compile time.
template <bool kConstN, End kEnd>
__global__ void __launch_bounds__(512)
    EngineLoop(const Seg* __restrict__ segs, uint32_t begin, unsigned* finished) {
  const Seg s = segs[begin + blockIdx.x];
  kvlane::gpu::CopyRange(s.dst, s.src, s.len, threadIdx.x, kConstN ? 512 : blockDim.x);
  EndBlock(kEnd, finished);
}

template <bool kConstN, End kEnd>
void LaunchLoop(const Seg* segs, uint32_t n, unsigned* finished, cudaStream_t s) {
  EngineLoop<kConstN, kEnd><<<n, 512, 0, s>>>(segs, 0, finished);
}

template <int T, int U, bool kFence>
__device__ __forceinline__ void MoveBody(const Seg* __restrict__ segs, uint32_t begin,
                                         unsigned* finished) {
  const Seg s = segs[begin + blockIdx.x];
  const uint64_t nv = s.len / 16;
  const uint4* src = reinterpret_cast<const uint4*>(s.src);
  uint4* dst = reinterpret_cast<uint4*>(s.dst);
  for (uint64_t base = threadIdx.x; base < nv; base += uint64_t{T} * U) {
    uint4 v[U];
#pragma unroll
    for (int k = 0; k < U; ++k)
      if (base + k * T < nv) v[k] = src[base + k * T];
#pragma unroll
    for (int k = 0; k < U; ++k)
      if (base + k * T < nv) dst[base + k * T] = v[k];
  }
  if constexpr (kFence) {
    __threadfence_system();
    __syncthreads();
    if (threadIdx.x == 0 && atomicAdd(finished, 1u) == gridDim.x - 1) *finished = 0;
  }
}

template <int T, int U, bool kFence>
__global__ void __launch_bounds__(T)
    MoveSegsT(const Seg* __restrict__ segs, uint32_t begin, unsigned* finished) {
  MoveBody<T, U, kFence>(segs, begin, finished);
}

__global__ void __launch_bounds__(kThreads) MoveSegs(const Seg* __restrict__ segs, uint32_t begin) {
  MoveBody<kThreads, kUnroll, false>(segs, begin, nullptr);
}

// The direct shapes compared: one block per descriptor, on GPU 0.
struct DirectShape {
  const char* name;
  void (*launch)(const Seg* segs, uint32_t n, unsigned* finished, cudaStream_t s);
};

template <int T, int U, bool kFence>
void LaunchT(const Seg* segs, uint32_t n, unsigned* finished, cudaStream_t s) {
  MoveSegsT<T, U, kFence><<<n, T, 0, s>>>(segs, 0, finished);
}

// The engine's copy kernel (src/gpu/copy_kernel.cu), parts = 1, grid = n.
template <kvlane::gpu::BlockFence kFence>
void LaunchEngine(const Seg* segs, uint32_t n, unsigned* finished, cudaStream_t s) {
  static uint64_t* done = [] {
    uint64_t* p = nullptr;
    CK(cudaHostAlloc(&p, 64, cudaHostAllocMapped | cudaHostAllocPortable));
    return p;
  }();
  static uint64_t value = 0;
  const kvlane::gpu::CopyDone d{finished, done, ++value, nullptr, 0};
  CK(kvlane::gpu::LaunchCopySegments(reinterpret_cast<const kvlane::gpu::CopySeg*>(segs), 0, n, 1,
                                     static_cast<int>(n), d, kFence, s));
}

constexpr DirectShape kDirect[] = {
    {"engine kernel, sys fence", LaunchEngine<kvlane::gpu::BlockFence::kSystem>},
    {"engine kernel, device fence", LaunchEngine<kvlane::gpu::BlockFence::kDevice>},
    {"t512 u4", LaunchT<512, 4, false>},
    {"t512 u4 fence", LaunchT<512, 4, true>},
    {"t512 u8", LaunchT<512, 8, false>},
    {"t256 u8", LaunchT<256, 8, false>},
    {"t256 u16", LaunchT<256, 16, false>},
    {"t1024 u4", LaunchT<1024, 4, false>},
    {"t1024 u8", LaunchT<1024, 8, false>},
    {"engine loop, n at run time, sys", LaunchLoop<false, kSys>},
    {"engine loop, n const, sys", LaunchLoop<true, kSys>},
    {"engine loop, n at run time, gpu sc", LaunchLoop<false, kGpuSc>},
    {"engine loop, n const, gpu sc", LaunchLoop<true, kGpuSc>},
    {"engine loop, n const, gpu acq_rel", LaunchLoop<true, kGpuAcqRel>},
    {"engine loop, n const, no end", LaunchLoop<true, kNone>},
};

__global__ void Fill(uint64_t* p, uint64_t words, uint64_t salt) {
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < words;
       i += uint64_t{gridDim.x} * blockDim.x)
    p[i] = (i * 0x9E3779B97F4A7C15ull) ^ salt;
}

using kvlane::test::Pct;

// A segment table in one GPU's memory.
Seg* Upload(int dev, const std::vector<Seg>& h) {
  CK(cudaSetDevice(dev));
  Seg* d = nullptr;
  CK(cudaMalloc(&d, h.size() * sizeof(Seg)));
  CK(cudaMemcpy(d, h.data(), h.size() * sizeof(Seg), cudaMemcpyHostToDevice));
  return d;
}

struct Side {
  int dev;
  uint8_t* pool;   // 2 kN slots of kD
  uint8_t* stage;  // kN * kD (a ring uses its first k * m * kD)
  cudaStream_t stream;
};

struct Dir {
  const char* name;
  Side* src;
  Side* dst;
  Seg* gather;   // on src->dev: pool slot -> stage + i * kD
  Seg* scatter;  // on dst->dev: stage + i * kD -> pool slot
  Seg* direct;   // on GPU 0: src pool slot -> dst pool slot (peer stores or loads)
};

struct Probe {
  Side g0, g1;
  cudaStream_t ce;  // GPU 0: the initiator's copy-engine stream
  std::vector<uint32_t> ls, rs;
  std::vector<cudaEvent_t> ev_gather, ev_ce, ev_scatter;  // per chunk (kMaxChunks)
  cudaEvent_t fork, join0, join1;                         // GPU 0, GPU 0, GPU 1
  unsigned* finished = nullptr;                           // GPU 0: blocks done (fence shapes)

  double RefUs(const Dir& d) {
    CK(cudaSetDevice(0));
    auto t0 = Clock::now();
    CK(cudaMemcpyPeerAsync(d.dst->stage, d.dst->dev, d.src->stage, d.src->dev, kN * kD, ce));
    CK(cudaStreamSynchronize(ce));
    return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
  }

  // Forks from and joins into `ce`, so that the whole list can be captured
  // into one graph from `ce`. what = 0: staged (gather, ce, scatter); 1: ce
  // chunks only; 2: gather only; 3: scatter only. m descriptors per chunk, k
  // ring slots.
  void Enqueue(const Dir& d, uint32_t m, uint32_t k, int what) {
    const uint32_t chunks = static_cast<uint32_t>((kN + m - 1) / m);
    CK(cudaSetDevice(0));
    CK(cudaEventRecord(fork, ce));
    for (Side* s : {d.src, d.dst}) {
      CK(cudaSetDevice(s->dev));
      CK(cudaStreamWaitEvent(s->stream, fork, 0));
    }
    for (uint32_t c = 0; c < chunks; ++c) {
      const uint32_t b = c * m, e = static_cast<uint32_t>(std::min<uint64_t>(kN, b + m));
      const uint64_t slot = uint64_t{c % k} * m * kD;
      if (what == 0 || what == 2) {
        CK(cudaSetDevice(d.src->dev));
        if (what == 0 && c >= k) CK(cudaStreamWaitEvent(d.src->stream, ev_ce[c - k], 0));
        // The gather table maps descriptor i to its chunk's ring slot.
        MoveSegs<<<e - b, kThreads, 0, d.src->stream>>>(d.gather, b);
        CK(cudaGetLastError());
        CK(cudaEventRecord(ev_gather[c], d.src->stream));
      }
      if (what == 0 || what == 1) {
        CK(cudaSetDevice(0));
        if (what == 0) CK(cudaStreamWaitEvent(ce, ev_gather[c], 0));
        if (what == 0 && c >= k) CK(cudaStreamWaitEvent(ce, ev_scatter[c - k], 0));
        // (cudaMemcpyPeerAsync cannot be captured; with peer access and UVA
        // this is the same copy-engine copy.)
        CK(cudaMemcpyAsync(d.dst->stage + slot, d.src->stage + slot, uint64_t{e - b} * kD,
                           cudaMemcpyDeviceToDevice, ce));
        CK(cudaEventRecord(ev_ce[c], ce));
      }
      if (what == 0 || what == 3) {
        CK(cudaSetDevice(d.dst->dev));
        if (what == 0) CK(cudaStreamWaitEvent(d.dst->stream, ev_ce[c], 0));
        MoveSegs<<<e - b, kThreads, 0, d.dst->stream>>>(d.scatter, b);
        CK(cudaGetLastError());
        CK(cudaEventRecord(ev_scatter[c], d.dst->stream));
      }
    }
    for (Side* s : {d.src, d.dst}) {
      CK(cudaSetDevice(s->dev));
      CK(cudaEventRecord(s == &g0 ? join0 : join1, s->stream));
    }
    CK(cudaSetDevice(0));
    CK(cudaStreamWaitEvent(ce, join0, 0));
    CK(cudaStreamWaitEvent(ce, join1, 0));
  }

  double StagedUs(const Dir& d, uint32_t m, uint32_t k, int what) {
    auto t0 = Clock::now();
    Enqueue(d, m, k, what);
    CK(cudaStreamSynchronize(ce));
    return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
  }

  // The staged list captured once into a graph (nullptr: capture failed, the
  // error printed), then posted with one cudaGraphLaunch.
  cudaGraphExec_t Capture(const Dir& d, uint32_t m, uint32_t k) {
    CK(cudaSetDevice(0));
    cudaError_t e = cudaStreamBeginCapture(ce, cudaStreamCaptureModeRelaxed);
    cudaGraph_t g = nullptr;
    if (e == cudaSuccess) {
      Enqueue(d, m, k, 0);
      e = cudaStreamEndCapture(ce, &g);
    }
    cudaGraphExec_t x = nullptr;
    if (e == cudaSuccess) e = cudaGraphInstantiate(&x, g, 0);
    if (g != nullptr) (void)cudaGraphDestroy(g);
    if (e != cudaSuccess) {
      std::printf("graph capture m=%u: %s\n", m, cudaGetErrorString(e));
      (void)cudaGetLastError();
      return nullptr;
    }
    return x;
  }

  double GraphUs(cudaGraphExec_t x) {
    CK(cudaSetDevice(0));
    auto t0 = Clock::now();
    CK(cudaGraphLaunch(x, ce));
    CK(cudaStreamSynchronize(ce));
    return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
  }

  // The engine's way: one kernel on GPU 0 (the initiator) for the whole list,
  // pushing (WRITE) or pulling (READ) over NVLink.
  double DirectUs(const Dir& d, const DirectShape& shape) {
    CK(cudaSetDevice(0));
    auto t0 = Clock::now();
    shape.launch(d.direct, static_cast<uint32_t>(kN), finished, g0.stream);
    CK(cudaGetLastError());
    CK(cudaStreamSynchronize(g0.stream));
    return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
  }
};

// Every descriptor of the destination pool equals its source: -1, or the first
// that does not.
int64_t FirstBad(const Probe& p, const Dir& d) {
  std::vector<uint8_t> hs(2 * kN * kD), hd(2 * kN * kD);
  CK(cudaMemcpy(hs.data(), d.src->pool, hs.size(), cudaMemcpyDefault));
  CK(cudaMemcpy(hd.data(), d.dst->pool, hd.size(), cudaMemcpyDefault));
  const bool write = d.src == &p.g0;
  for (uint64_t i = 0; i < kN; ++i) {
    const uint64_t s = (write ? p.ls[i] : p.rs[i]) * kD, t = (write ? p.rs[i] : p.ls[i]) * kD;
    if (std::memcmp(hs.data() + s, hd.data() + t, kD) != 0) return static_cast<int64_t>(i);
  }
  return -1;
}

void Clear(const Dir& d) {
  CK(cudaSetDevice(d.dst->dev));
  CK(cudaMemset(d.dst->pool, 0xab, 2 * kN * kD));
  CK(cudaDeviceSynchronize());
}

template <class F>
std::vector<double> Samples(F f) {
  std::vector<double> t;
  for (int i = 0; i < 13; ++i) {
    double us = f();
    if (i >= 3) t.push_back(us);
  }
  return t;
}

void Row(const char* dir, const char* what, double us, double ref_us) {
  const double gb = kN * kD / us / 1e3, ref = kN * kD / ref_us / 1e3;
  std::printf("| %-5s | %-42s | %8.1f | %8.1f | %6.3f |\n", dir, what, gb, ref, gb / ref);
}

}  // namespace

// usage: cuda_staged_probe [--staged]  (without: the direct shapes only)
int main(int argc, char** argv) {
  const bool staged = argc > 1 && std::strcmp(argv[1], "--staged") == 0;
  int ndev = 0;
  CK(cudaGetDeviceCount(&ndev));
  if (ndev < 2) {
    std::printf("cuda_staged_probe: needs 2 GPUs (has %d)\n", ndev);
    return 1;
  }
  Probe p;
  for (int dev : {0, 1}) {
    Side& s = dev == 0 ? p.g0 : p.g1;
    s.dev = dev;
    CK(cudaSetDevice(dev));
    cudaError_t e = cudaDeviceEnablePeerAccess(1 - dev, 0);
    if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled) CK(e);
    (void)cudaGetLastError();
    CK(cudaMalloc(&s.pool, 2 * kN * kD));
    CK(cudaMalloc(&s.stage, kN * kD));
    CK(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking));
    Fill<<<1024, 256>>>(reinterpret_cast<uint64_t*>(s.pool), 2 * kN * kD / 8, 0x5eed0000ull + dev);
    CK(cudaDeviceSynchronize());
  }
  CK(cudaSetDevice(0));
  CK(cudaStreamCreateWithFlags(&p.ce, cudaStreamNonBlocking));
  CK(cudaMalloc(&p.finished, sizeof(unsigned)));
  CK(cudaMemset(p.finished, 0, sizeof(unsigned)));
  p.ls.resize(2 * kN), p.rs.resize(2 * kN);
  std::iota(p.ls.begin(), p.ls.end(), 0u);
  std::iota(p.rs.begin(), p.rs.end(), 0u);
  std::mt19937 rng(1);
  std::shuffle(p.ls.begin(), p.ls.end(), rng);
  std::shuffle(p.rs.begin(), p.rs.end(), rng);
  // An event records only on a stream of its own device: the copy's on GPU 0,
  // gather and scatter on either GPU by direction (ev0, ev1).
  std::vector<cudaEvent_t> ev0(kMaxChunks), ev1(kMaxChunks);
  p.ev_ce.resize(kMaxChunks);
  for (uint64_t c = 0; c < kMaxChunks; ++c) {
    CK(cudaSetDevice(0));
    CK(cudaEventCreateWithFlags(&p.ev_ce[c], cudaEventDisableTiming));
  }
  CK(cudaEventCreateWithFlags(&p.fork, cudaEventDisableTiming));
  CK(cudaEventCreateWithFlags(&p.join0, cudaEventDisableTiming));
  CK(cudaSetDevice(1));
  CK(cudaEventCreateWithFlags(&p.join1, cudaEventDisableTiming));
  for (uint64_t c = 0; c < kMaxChunks; ++c) {
    CK(cudaSetDevice(0));
    CK(cudaEventCreateWithFlags(&ev0[c], cudaEventDisableTiming));
    CK(cudaSetDevice(1));
    CK(cudaEventCreateWithFlags(&ev1[c], cudaEventDisableTiming));
  }

  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf(
      "cuda_staged_probe: %s x%d, %llu descriptors of %llu B (%.1f MB), GB/s beside "
      "cudaMemcpyPeerAsync of the same bytes contiguous (p50 of 10 each)\n",
      prop.name, ndev, static_cast<unsigned long long>(kN), static_cast<unsigned long long>(kD),
      kN * kD / 1e6);
  std::printf("| dir   | %-42s | %8s | %8s | %6s |\n", "shape", "GB/s", "ref GB/s", "ratio");
  std::printf(
      "|-------|--------------------------------------------|----------|----------|--------|\n");

  int fails = 0;
  for (int write : {1, 0}) {
    Dir d{};
    d.name = write ? "WRITE" : "READ";
    d.src = write ? &p.g0 : &p.g1;
    d.dst = write ? &p.g1 : &p.g0;
    const auto& sl = write ? p.ls : p.rs;  // source slots
    const auto& dl = write ? p.rs : p.ls;  // destination slots
    std::vector<Seg> gather(kN), scatter(kN), direct(kN);
    for (uint64_t i = 0; i < kN; ++i) {
      direct[i] = {reinterpret_cast<uint64_t>(d.src->pool) + sl[i] * kD,
                   reinterpret_cast<uint64_t>(d.dst->pool) + dl[i] * kD, kD};
    }
    p.ev_gather = write ? ev0 : ev1;
    p.ev_scatter = write ? ev1 : ev0;
    auto ref = [&] { return Pct(Samples([&] { return p.RefUs(d); }), 50); };

    Clear(d);
    d.direct = Upload(0, direct);
    for (const DirectShape& shape : kDirect) {
      Clear(d);
      const double r = ref();
      const double t = Pct(Samples([&] { return p.DirectUs(d, shape); }), 50);
      char what[96];
      std::snprintf(what, sizeof(what), "direct %s %s", write ? "push" : "pull", shape.name);
      Row(d.name, what, t, r);
      const int64_t bad = FirstBad(p, d);
      std::printf("verify %s %s: %s\n", d.name, what,
                  bad < 0 ? "PASS" : ("FAIL at " + std::to_string(bad)).c_str());
      fails += bad >= 0;
    }
    for (uint32_t m :
         staged ? std::vector<uint32_t>{64, 128, 256, 512, 1024} : std::vector<uint32_t>{}) {
      for (uint32_t k : {2u, 4u, 0u}) {  // 0: no reuse (a slot per chunk)
        const uint32_t chunks = static_cast<uint32_t>((kN + m - 1) / m);
        const uint32_t slots = k == 0 ? chunks : k;
        if (k != 0 && slots >= chunks) continue;
        for (uint64_t i = 0; i < kN; ++i) {
          const uint64_t at = (i / m % slots) * m + i % m;  // the chunk's ring slot
          gather[i] = {reinterpret_cast<uint64_t>(d.src->pool) + sl[i] * kD,
                       reinterpret_cast<uint64_t>(d.src->stage) + at * kD, kD};
          scatter[i] = {reinterpret_cast<uint64_t>(d.dst->stage) + at * kD,
                        reinterpret_cast<uint64_t>(d.dst->pool) + dl[i] * kD, kD};
        }
        d.gather = Upload(d.src->dev, gather);
        d.scatter = Upload(d.dst->dev, scatter);
        Clear(d);
        const double r = ref();
        const double t = Pct(Samples([&] { return p.StagedUs(d, m, slots, 0); }), 50);
        char what[96];
        std::snprintf(what, sizeof(what), "staged m=%u (%.1f MB) ring=%u", m, m * kD / 1e6, slots);
        Row(d.name, what, t, r);
        const int64_t bad = FirstBad(p, d);
        std::printf("verify %s %s: %s\n", d.name, what,
                    bad < 0 ? "PASS" : ("FAIL at " + std::to_string(bad)).c_str());
        fails += bad >= 0;
        if (k == 4) {
          if (cudaGraphExec_t x = p.Capture(d, m, slots)) {
            Clear(d);
            const double tg = Pct(Samples([&] { return p.GraphUs(x); }), 50);
            std::snprintf(what, sizeof(what), "staged m=%u ring=%u, one graph", m, slots);
            Row(d.name, what, tg, r);
            const int64_t bad = FirstBad(p, d);
            std::printf("verify %s %s: %s\n", d.name, what,
                        bad < 0 ? "PASS" : ("FAIL at " + std::to_string(bad)).c_str());
            fails += bad >= 0;
            CK(cudaGraphExecDestroy(x));
          }
        }
        if (k == 0) {
          for (int part : {1, 2, 3}) {
            const double tp = Pct(Samples([&] { return p.StagedUs(d, m, slots, part); }), 50);
            std::snprintf(what, sizeof(what), "  %s alone m=%u",
                          part == 1   ? "ce chunks"
                          : part == 2 ? "gather"
                                      : "scatter",
                          m);
            Row(d.name, what, tp, r);
          }
        }
        CK(cudaFree(d.gather));
        CK(cudaFree(d.scatter));
      }
    }
    CK(cudaFree(d.direct));
  }
  std::printf("cuda_staged_probe: %s\n", fails == 0 ? "all verified" : "VERIFY FAILED");
  return fails == 0 ? 0 : 1;
}
