#include "bench_probes.h"

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "bench_common.h"
#include "copy_probe.h"
#include "gpu/copy_launch.h"
#include "transport/cuda/cuda_check.h"

namespace kvlane::test {

// Probe (not kvlane): the bare copy kernel over the scattered list, GPU 0 ->
// GPU 1 in this process, for several work cuts; microseconds per launch.
void KernelSweep(Bench& b, const std::vector<uint32_t>& ls, const std::vector<uint32_t>& rs,
                 uint64_t n, uint64_t d) {
  std::vector<gpu::CopySeg> h(n);
  for (uint64_t i = 0; i < n; ++i)
    h[i] = {reinterpret_cast<uint64_t>(b.local) + ls[i] * d,
            reinterpret_cast<uint64_t>(b.ref_dst) + rs[i] * d, d};
  KernelScratch k(n);
  gpu::CopySeg* const segs = k.segs;
  uint32_t* const fin = k.fin;
  uint64_t* const done = k.done;
  cudaMemcpy(segs, h.data(), n * sizeof(gpu::CopySeg), cudaMemcpyHostToDevice);
  for (uint32_t parts : {1u, 2u, 3u}) {
    for (int grid : {static_cast<int>(n * parts), 528, 1056}) {
      auto t = ProbeTimes(b, [&](int it) {
        gpu::LaunchCopySegments(segs, 0, static_cast<uint32_t>(n), parts, grid,
                                {fin, done, uint64_t(it)}, gpu::BlockFence::kSystem, b.stream);
        (void)cudaStreamSynchronize(b.stream);
        return cudaSuccess;
      });
      char name[96];
      std::snprintf(name, sizeof(name), "probe kernel parts=%u grid=%d GB/s", parts, grid);
      ProbeRow(b, name, n * d, t);
    }
  }
  // Probe: variants of the copy loop (copy_probe.cu), one block per descriptor.
  for (const ProbeVariant& v : kProbeVariants) {
    cudaError_t err = cudaSuccess;
    auto t = ProbeTimes(
        b,
        [&](int) {
          cudaError_t e = LaunchProbe(v, segs, static_cast<uint32_t>(n), b.stream);
          return e == cudaSuccess ? cudaStreamSynchronize(b.stream) : e;
        },
        &err);
    char name[96];
    std::snprintf(name, sizeof(name), "probe loop %s GB/s", v.name);
    if (err == cudaSuccess)
      ProbeRow(b, name, n * d, t);
    else
      std::printf("%s: %s\n", name, cudaGetErrorString(err));
    (void)cudaGetLastError();
  }
  // Probe: the copy kernel's loop (one block per descriptor) ended four ways, so
  // that what a block's fence costs shows beside the copy alone.
  for (const auto& f : kProbeFences) {
    auto t = ProbeTimes(b, [&](int) {
      cudaError_t e = LaunchFenceProbe(f.fence, segs, static_cast<uint32_t>(n), fin, b.stream);
      return e == cudaSuccess ? cudaStreamSynchronize(b.stream) : e;
    });
    char name[96];
    std::snprintf(name, sizeof(name), "probe fence %s grid=%d GB/s", f.name, static_cast<int>(n));
    ProbeRow(b, name, n * d, t);
  }
  // Probe: the bulk-copy (TMA) kernel, with every destination byte checked once.
  {
    const uint32_t parts = static_cast<uint32_t>((d + gpu::kTmaUnitBytes - 1) / gpu::kTmaUnitBytes);
    cudaMemset(b.ref_dst, 0xab, 2 * n * d);
    cudaDeviceSynchronize();
    cudaError_t err = gpu::LaunchCopySegmentsTma(segs, 0, static_cast<uint32_t>(n), parts,
                                                 static_cast<int>(n * parts), {fin, done, 99},
                                                 gpu::BlockFence::kSystem, b.stream);
    if (err == cudaSuccess) err = cudaStreamSynchronize(b.stream);
    int64_t bad = err == cudaSuccess ? -1 : -2;
    std::vector<uint8_t> hs(d), hd(d);
    for (uint64_t i = 0; i < n && bad == -1; ++i) {
      cudaMemcpy(hs.data(), reinterpret_cast<void*>(h[i].src), d, cudaMemcpyDefault);
      cudaMemcpy(hd.data(), reinterpret_cast<void*>(h[i].dst), d, cudaMemcpyDefault);
      if (hs != hd) bad = static_cast<int64_t>(i);
    }
    std::printf("probe tma kernel verify: %s\n",
                bad == -1   ? "PASS"
                : bad == -2 ? cudaGetErrorString(err)
                            : ("FAIL at desc " + std::to_string(bad)).c_str());
    (void)cudaGetLastError();
    for (int grid : {static_cast<int>(n * parts), 264, 528, 1056}) {
      if (bad != -1) break;
      auto t = ProbeTimes(b, [&](int it) {
        gpu::LaunchCopySegmentsTma(segs, 0, static_cast<uint32_t>(n), parts, grid,
                                   {fin, done, uint64_t(it)}, gpu::BlockFence::kSystem, b.stream);
        (void)cudaStreamSynchronize(b.stream);
        return cudaSuccess;
      });
      char name[96];
      std::snprintf(name, sizeof(name), "probe tma kernel grid=%d GB/s", grid);
      ProbeRow(b, name, n * d, t);
    }
    // READ direction (remote -> local) with the TMA kernel and the current kernel.
    std::vector<gpu::CopySeg> rv(h);
    for (auto& g : rv) std::swap(g.src, g.dst);
    cudaMemcpy(segs, rv.data(), n * sizeof(gpu::CopySeg), cudaMemcpyHostToDevice);
    for (int tma = 0; tma < 2 && bad == -1; ++tma) {
      auto t = ProbeTimes(b, [&](int it) {
        if (tma)
          gpu::LaunchCopySegmentsTma(segs, 0, static_cast<uint32_t>(n), parts,
                                     static_cast<int>(n * parts), {fin, done, uint64_t(it)},
                                     gpu::BlockFence::kDevice, b.stream);
        else
          gpu::LaunchCopySegments(segs, 0, static_cast<uint32_t>(n), 1, static_cast<int>(n),
                                  {fin, done, uint64_t(it)}, gpu::BlockFence::kDevice,
                                  b.stream);  // into GPU 0: as the engine's READ
        (void)cudaStreamSynchronize(b.stream);
        return cudaSuccess;
      });
      ProbeRow(
          b,
          tma ? "probe tma kernel READ grid=6146 GB/s" : "probe kernel READ parts=1 grid=6146 GB/s",
          n * d, t,
          /*write=*/false);
    }
    cudaMemcpy(segs, h.data(), n * sizeof(gpu::CopySeg), cudaMemcpyHostToDevice);
  }
  // Probe: one copy-engine batch (cudaMemcpyBatchAsync) for the same list.
  std::vector<void*> dsts(n), srcs(n);
  std::vector<size_t> sizes(n, d);
  for (uint64_t i = 0; i < n; ++i)
    dsts[i] = reinterpret_cast<void*>(h[i].dst), srcs[i] = reinterpret_cast<void*>(h[i].src);
  cudaMemcpyAttributes attr{};
  attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
  size_t idx = 0;
  cudaError_t err = cudaSuccess;
  auto t = ProbeTimes(
      b,
      [&](int) {
        cudaError_t e =
            cudaMemcpyBatchAsync(dsts.data(), const_cast<const void* const*>(srcs.data()),
                                 sizes.data(), n, &attr, &idx, 1, b.stream);
        (void)cudaStreamSynchronize(b.stream);
        return e;
      },
      &err);
  if (err == cudaSuccess)
    ProbeRow(b, "probe cudaMemcpyBatchAsync 6146x37440B GB/s", n * d, t);
  else
    std::printf("probe cudaMemcpyBatchAsync: %s\n", cudaGetErrorString(err));
  (void)cudaGetLastError();
  // Probe: the kernel on the head of the list and one copy-engine batch on its
  // tail, at once on two streams (does the copy engine add to the SM stores?).
  cudaStream_t side = nullptr;
  cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking);
  for (uint32_t pct : {4u, 8u, 12u, 16u}) {
    const uint64_t tail = n * pct / 100, head = n - tail;
    auto th = ProbeTimes(
        b,
        [&](int it) {
          cudaError_t e = cudaMemcpyBatchAsync(dsts.data() + head,
                                               const_cast<const void* const*>(srcs.data() + head),
                                               sizes.data() + head, tail, &attr, &idx, 1, side);
          gpu::LaunchCopySegments(segs, 0, static_cast<uint32_t>(head), 1, static_cast<int>(head),
                                  {fin, done, uint64_t(it)}, gpu::BlockFence::kSystem, b.stream);
          (void)cudaStreamSynchronize(b.stream);
          (void)cudaStreamSynchronize(side);
          return e;
        },
        &err);
    char name[96];
    std::snprintf(name, sizeof(name), "probe kernel + CE batch (%u%% of descs) GB/s", pct);
    if (err == cudaSuccess) ProbeRow(b, name, n * d, th);
    (void)cudaGetLastError();
  }
  cudaStreamDestroy(side);
}

// Probe (not kvlane): the copy-engine mechanism of the bulk path alone, on the
// target's IPC-mapped buffer: cudaMemcpyAsync + cuStreamWriteValue64 into
// pinned host memory that this thread polls, and cudaMemcpyAsync +
// cudaStreamSynchronize; each beside the reference of the same bytes.
// Runs after every kvlane row: the agent opened the same handle before.
void CopyEngineProbe(Bench& b) {
  std::string ipc = Unhex(b.target.Call("ipc " + std::to_string(b.remote)));
  if (ipc.size() == sizeof(cudaIpcMemHandle_t)) {
    cudaIpcMemHandle_t hnd;
    std::memcpy(&hnd, ipc.data(), sizeof(hnd));
    void* p = nullptr;
    cudaError_t e = cudaIpcOpenMemHandle(&p, hnd, cudaIpcMemLazyEnablePeerAccess);
    if (e == cudaSuccess)
      b.ipc_remote = static_cast<uint8_t*>(p);
    else
      std::printf("probe copy engine: cudaIpcOpenMemHandle: %s\n", cudaGetErrorString(e));
    (void)cudaGetLastError();
  }
  if (b.ipc_remote == nullptr || kvlane::core::Driver().write_value64 == nullptr) {
    std::printf("probe copy engine: no IPC mapping or no cuStreamWriteValue64\n");
    return;
  }
  uint64_t* word = nullptr;
  cudaHostAlloc(reinterpret_cast<void**>(&word), 64, cudaHostAllocMapped | cudaHostAllocPortable);
  *word = 0;
  uint64_t value = 0;
  auto memop = [&](uint64_t len) {
    auto t0 = Clock::now();
    cudaMemcpyAsync(b.ipc_remote, b.local, len, cudaMemcpyDefault, b.stream);
    (void)kvlane::core::Driver().write_value64(b.stream, reinterpret_cast<unsigned long long>(word),
                                               ++value, 0);
    while (std::atomic_ref<uint64_t>(*word).load(std::memory_order_acquire) != value) {
    }
    return b.Us(t0, Clock::now());
  };
  auto sync = [&](uint64_t len) {
    auto t0 = Clock::now();
    cudaMemcpyAsync(b.ipc_remote, b.local, len, cudaMemcpyDefault, b.stream);
    cudaStreamSynchronize(b.stream);
    return b.Us(t0, Clock::now());
  };
  for (uint64_t len : {uint64_t{2} << 20, uint64_t{256} << 20, uint64_t{1} << 30}) {
    const bool lat = len <= (2u << 20);
    const int n = lat ? 500 : 10, warm = lat ? 100 : 2;
    std::vector<double> tm, ts;
    for (int i = 0; i < warm + n; ++i) {
      double a = memop(len), c = sync(len);
      if (i >= warm) tm.push_back(a), ts.push_back(c);
    }
    auto ref = b.RefTimes(true, len, warm, n);
    char name[96];
    const char* lab = len == (2u << 20) ? "2MiB" : len == (256u << 20) ? "256MiB" : "1GiB";
    if (lat) {
      std::snprintf(name, sizeof(name), "probe CE+writeValue64 IPC %s p50 us", lab);
      Row(name, Pct(tm, 50), Pct(ref, 50), "us");
      std::snprintf(name, sizeof(name), "probe CE+writeValue64 IPC %s p99 us", lab);
      Row(name, Pct(tm, 99), Pct(ref, 99), "us");
      std::snprintf(name, sizeof(name), "probe CE+streamSync IPC %s p50 us", lab);
      Row(name, Pct(ts, 50), Pct(ref, 50), "us");
    } else {
      std::snprintf(name, sizeof(name), "probe CE+writeValue64 IPC %s GB/s", lab);
      Row(name, len / Pct(tm, 50) / 1e3, len / Pct(ref, 50) / 1e3, "GB/s");
      std::snprintf(name, sizeof(name), "probe CE+streamSync IPC %s GB/s", lab);
      Row(name, len / Pct(ts, 50) / 1e3, len / Pct(ref, 50) / 1e3, "GB/s");
    }
  }
  cudaFreeHost(word);
}

}  // namespace kvlane::test
