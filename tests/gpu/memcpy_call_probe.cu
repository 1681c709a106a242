// cuda_memcpy_call_probe: what the host pays to queue one 1 MiB copy from GPU 0
// to GPU 1, per API (issue #6's 2 MiB p50 is ~1.03-1.07 of cudaMemcpyPeerAsync,
// and kvlane's own host work before its cudaMemcpyAsync is ~0.5 us). For each
// variant, 1,000 rounds (after 50 warm-ups): time the queueing call(s) on the
// host, then synchronize the stream, and time the whole round too. Variants:
// the runtime's cudaMemcpyAsync with cudaMemcpyDefault (what the engine calls)
// and with cudaMemcpyDeviceToDevice, cudaMemcpyPeerAsync (cuda_bench's
// reference), the driver's cuMemcpyAsync and cuMemcpyDtoDAsync, each alone and,
// for the engine's call, followed by the cuStreamWriteValue64 of its record.
#include <cuda.h>
#include <cuda_runtime.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <vector>

#include "percentile.h"
#include "two_gpu_buffers.h"

namespace {

using Clock = std::chrono::steady_clock;

template <typename Fn>
Fn Entry(const char* name) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult q{};
  if (cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &q) != cudaSuccess ||
      q != cudaDriverEntryPointSuccess)
    return nullptr;
  return reinterpret_cast<Fn>(fn);
}

void Time(const char* name, cudaStream_t s, const std::function<int()>& queue) {
  std::vector<double> call, round;
  int bad = 0;
  for (int i = 0; i < 1050; ++i) {
    const auto t0 = Clock::now();
    bad += queue() != 0;
    const auto t1 = Clock::now();
    cudaStreamSynchronize(s);
    const auto t2 = Clock::now();
    if (i < 50) continue;
    call.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    round.push_back(std::chrono::duration<double, std::micro>(t2 - t0).count());
  }
  std::printf("%-44s call p50 %5.2f p90 %5.2f us   round p50 %6.2f p90 %6.2f us%s\n", name,
              kvlane::test::Pct(call, 50), kvlane::test::Pct(call, 90), kvlane::test::Pct(round, 50),
              kvlane::test::Pct(round, 90), bad ? "  (errors)" : "");
}

}  // namespace

int main() {
  const kvlane::test::TwoGpuBuffers g = kvlane::test::AllocTwoGpuBuffers();
  constexpr size_t kBytes = 1 << 20;  // the buffers' size (two_gpu_buffers.h)
  using MemcpyAsync = CUresult (*)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
  using WriteValue64 = CUresult (*)(CUstream, CUdeviceptr, cuuint64_t, unsigned);
  const auto cu_memcpy = Entry<MemcpyAsync>("cuMemcpyAsync");
  const auto cu_dtod = Entry<MemcpyAsync>("cuMemcpyDtoDAsync");
  const auto write64 = Entry<WriteValue64>("cuStreamWriteValue64");
  uint64_t* record = nullptr;
  cudaHostAlloc(&record, 64, cudaHostAllocMapped | cudaHostAllocPortable);
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  auto* dst = reinterpret_cast<void*>(g.remote);
  auto* src = reinterpret_cast<const void*>(g.local);
  std::printf("cuda_memcpy_call_probe: %zu KiB GPU 0 -> GPU %d per round\n", kBytes >> 10, g.peer);
  uint64_t v = 0;
  for (int round = 0; round < 2; ++round) {
    Time("cudaMemcpyAsync Default", s,
         [&] { return int(cudaMemcpyAsync(dst, src, kBytes, cudaMemcpyDefault, s)); });
    Time("cudaMemcpyAsync DeviceToDevice", s,
         [&] { return int(cudaMemcpyAsync(dst, src, kBytes, cudaMemcpyDeviceToDevice, s)); });
    Time("cudaMemcpyPeerAsync", s,
         [&] { return int(cudaMemcpyPeerAsync(dst, g.peer, src, 0, kBytes, s)); });
    if (cu_memcpy)
      Time("cuMemcpyAsync", s, [&] {
        return int(cu_memcpy(reinterpret_cast<CUdeviceptr>(dst), reinterpret_cast<CUdeviceptr>(src),
                             kBytes, s));
      });
    if (cu_dtod)
      Time("cuMemcpyDtoDAsync", s, [&] {
        return int(cu_dtod(reinterpret_cast<CUdeviceptr>(dst), reinterpret_cast<CUdeviceptr>(src),
                           kBytes, s));
      });
    if (write64) {
      Time("cudaMemcpyAsync Default + WriteValue64", s, [&] {
        int e = int(cudaMemcpyAsync(dst, src, kBytes, cudaMemcpyDefault, s));
        return e | int(write64(s, reinterpret_cast<CUdeviceptr>(record), ++v, 0));
      });
      if (cu_memcpy)
        Time("cuMemcpyAsync + WriteValue64", s, [&] {
          int e = int(cu_memcpy(reinterpret_cast<CUdeviceptr>(dst),
                                reinterpret_cast<CUdeviceptr>(src), kBytes, s));
          return e | int(write64(s, reinterpret_cast<CUdeviceptr>(record), ++v, 0));
        });
    }
  }
  return 0;
}
