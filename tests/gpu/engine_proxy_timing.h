// The engine's proxy on its own, for the probes (cuda_push_read_probe,
// cuda_proxy_shape_probe): CudaProxy (its kernel, ring and Submit) on GPU 0,
// one block, no renewal, without the rest of the engine.
#pragma once

#include <cuda_runtime.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "gpu/copy_types.h"
#include "round_trip.h"
#include "transport/cuda/cuda_proxy.h"

namespace kvlane::test {

// Rounds of Submit of one 4 KiB segment src -> dst to its record landing
// (TimeRoundTrips with `seed`), printed as one line padded to `width`, with
// Submit's own p50 and how the proxy shut down.
inline void TimeEngineProxy(const char* name, int width, uint32_t seed, uint64_t src,
                            uint64_t dst) {
  using Clock = std::chrono::steady_clock;
  cudaSetDevice(0);
  uint64_t* done = nullptr;
  uint8_t* records = nullptr;
  cudaHostAlloc(&done, gpu::kProxyRing * sizeof(uint64_t),
                cudaHostAllocMapped | cudaHostAllocPortable);
  cudaHostAlloc(&records, 4 * gpu::kRecordStride, cudaHostAllocMapped | cudaHostAllocPortable);
  std::memset(done, 0, gpu::kProxyRing * sizeof(uint64_t));
  std::memset(records, 0, 4 * gpu::kRecordStride);
  {
    core::CudaProxy proxy;
    const Status init =
        proxy.Init(1, done, 0, std::chrono::microseconds(0), std::chrono::seconds(5), records, 4);
    const gpu::CopySeg seg{src, dst, 4096};
    // As the channel decides it (XferTable::dst_on_device): GPU 0's own memory.
    cudaPointerAttributes at{};
    const bool dst_local =
        cudaPointerGetAttributes(&at, reinterpret_cast<void*>(dst)) == cudaSuccess &&
        at.type == cudaMemoryTypeDevice && at.device == 0;
    auto* record = reinterpret_cast<uint64_t*>(records);
    std::vector<double> submit;
    RoundTrips r;
    if (init.ok()) {
      r = TimeRoundTrips(
          seed,
          [&](uint64_t k) {
            const auto t0 = Clock::now();
            const auto gen = static_cast<uint32_t>(k);
            const Status s =
                proxy.Submit(&seg, 0, 1, k, 1, gen, dst_local, std::chrono::milliseconds(1000));
            if (k > kWarm)
              submit.push_back(
                  std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
            return s.ok() ? std::string() : s.ToString();
          },
          [&](uint64_t k) { return __atomic_load_n(record, __ATOMIC_ACQUIRE) == k << 32; });
    } else {
      r.error = init.ToString();
    }
    const Status sd = proxy.Shutdown(std::chrono::milliseconds(1000));
    char note[96];
    std::snprintf(note, sizeof(note), "Submit p50 %.2f us; shutdown %s",
                  submit.empty() ? 0.0 : Pct(submit, 50), sd.ToString().c_str());
    PrintRoundTrips(name, width, r, note);
  }
  cudaFreeHost(done);
  cudaFreeHost(records);
}

}  // namespace kvlane::test
