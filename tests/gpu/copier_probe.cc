// cuda_copier_probe: what tcp's device staging costs per window, without the
// socket. One window = the copier's half (1 MiB) filled from (ToHost) or
// drained into (ToDevice) device ranges of one size, scattered over a pool
// (shuffled slots, so no two ranges are adjacent), as tcp moves a paged KV
// list. Timed on the host from the first queued range to Wait's return
// (p50 / p99 of 200 windows after 20 warm-ups), for:
//   engine:  the copier this build ships (transport/cuda/cuda_copier.cc);
//   ref:     one cudaMemcpyAsync per range on one stream, then a stream
//            synchronize: the copier of session 11, measured in the same run;
//   contig:  one cudaMemcpyAsync of the whole window (the copy engine's
//            ceiling for the bytes).
// Each engine row is verified once (every byte of the window, both ways).
//   usage: cuda_copier_probe [device]
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "percentile.h"
#include "transport/cuda/cuda_copier.h"

namespace {

using kvlane::core::DeviceCopier;
using kvlane::test::Pct;
using Clock = std::chrono::steady_clock;

constexpr int kWarm = 20, kRuns = 200;

#define CHECK_CUDA(x)                                               \
  do {                                                              \
    cudaError_t e_ = (x);                                           \
    if (e_ != cudaSuccess) {                                        \
      std::fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_)); \
      std::exit(2);                                                 \
    }                                                               \
  } while (0)

struct Window {
  std::vector<uint8_t*> dev;  // one device address per range
  size_t len = 0;             // bytes per range
};

// Ranges of `len` bytes covering one half, at shuffled slots of `pool`.
Window Scatter(uint8_t* pool, size_t pool_bytes, size_t half, size_t len, std::mt19937_64& rng) {
  Window w;
  w.len = len;
  const size_t n = half / len, slots = pool_bytes / len;
  std::vector<size_t> order(slots);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  for (size_t i = 0; i < n; ++i) w.dev.push_back(pool + order[i] * len);
  return w;
}

// Microseconds per window: queue every range of `w` with `queue`, then `wait`.
template <typename Queue, typename Wait>
std::vector<double> Time(const Window& w, Queue queue, Wait wait) {
  std::vector<double> us;
  for (int r = 0; r < kWarm + kRuns; ++r) {
    const auto t0 = Clock::now();
    for (size_t i = 0; i < w.dev.size(); ++i) queue(i * w.len, w.dev[i]);
    wait();
    const double t = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    if (r >= kWarm) us.push_back(t);
  }
  return us;
}

void Row(const char* what, const char* dir, size_t len, size_t n, const std::vector<double>& us,
         double ref_p50) {
  const double p50 = Pct(us, 50), bytes = static_cast<double>(n * len);
  std::printf("%-7s %-9s %8zu %6zu %9.1f %9.1f %8.2f", what, dir, len, n, p50, Pct(us, 99),
              bytes / p50 / 1e3);
  if (ref_p50 > 0) std::printf("  %5.2fx ref", ref_p50 / p50);
  std::printf("\n");
}

// Checks the engine copier both ways over `w` once: device -> half equals the
// device bytes, half -> device lands them back after the device was cleared.
bool Verify(DeviceCopier& c, const Window& w, std::vector<uint8_t>& expect) {
  for (int dir = 0; dir < 2; ++dir) {
    for (size_t i = 0; i < w.dev.size(); ++i) {
      if (dir == 0) {
        CHECK_CUDA(cudaMemcpy(w.dev[i], expect.data() + i * w.len, w.len, cudaMemcpyHostToDevice));
        if (!c.ToHost(0, i * w.len, w.dev[i], w.len).ok()) return false;
      } else {
        CHECK_CUDA(cudaMemset(w.dev[i], 0, w.len));
        if (!c.ToDevice(0, i * w.len, w.dev[i], w.len).ok()) return false;
      }
    }
    if (!c.Flush(0).ok() || !c.Wait(0).ok()) return false;
    if (dir == 0 && std::memcmp(c.half(0), expect.data(), w.dev.size() * w.len) != 0) return false;
  }
  std::vector<uint8_t> back(w.len);
  for (size_t i = 0; i < w.dev.size(); ++i) {
    CHECK_CUDA(cudaMemcpy(back.data(), w.dev[i], w.len, cudaMemcpyDeviceToHost));
    if (std::memcmp(back.data(), expect.data() + i * w.len, w.len) != 0) return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const int device = argc > 1 ? std::atoi(argv[1]) : 0;
  CHECK_CUDA(cudaSetDevice(device));
  auto staging = kvlane::core::MakeCudaStaging();
  if (!staging) {
    std::printf("no GPU\n");
    return 1;
  }
  constexpr size_t kPool = 256u << 20;
  uint8_t* pool = nullptr;
  CHECK_CUDA(cudaMalloc(&pool, kPool));
  auto made = staging->MakeCopier(pool);
  if (!made.ok()) {
    std::printf("copier: %s\n", made.status().ToString().c_str());
    return 1;
  }
  DeviceCopier& c = **made;
  const size_t half = c.capacity();
  cudaStream_t s;
  CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  uint8_t* ref_half = nullptr;  // the reference's own pinned window
  CHECK_CUDA(cudaHostAlloc(&ref_half, half, cudaHostAllocPortable));
  std::mt19937_64 rng(7);
  std::vector<uint8_t> expect(half);
  for (auto& b : expect) b = static_cast<uint8_t>(rng());

  std::printf("copier probe, device %d, window %zu B, p50/p99 us of %d windows\n", device, half,
              kRuns);
  std::printf("%-7s %-9s %8s %6s %9s %9s %8s\n", "copier", "direction", "range_B", "ranges",
              "p50_us", "p99_us", "GB/s");
  bool ok = true;
  for (size_t len : {100ul, 4104ul, 22528ul, 37440ul, 65536ul, 262144ul}) {
    const Window w = Scatter(pool, kPool, half, len, rng);
    const size_t n = w.dev.size();
    const bool verified = Verify(c, w, expect);
    ok = ok && verified;
    for (int dir = 0; dir < 2; ++dir) {
      const bool to_host = dir == 0;
      const char* name = to_host ? "to-host" : "to-device";
      auto ref = Time(
          w,
          [&](size_t at, uint8_t* dev) {
            if (to_host)
              (void)cudaMemcpyAsync(ref_half + at, dev, len, cudaMemcpyDefault, s);
            else
              (void)cudaMemcpyAsync(dev, ref_half + at, len, cudaMemcpyDefault, s);
          },
          [&] { CHECK_CUDA(cudaStreamSynchronize(s)); });
      auto eng = Time(
          w,
          [&](size_t at, uint8_t* dev) {
            if (to_host)
              (void)c.ToHost(0, at, dev, len);
            else
              (void)c.ToDevice(0, at, dev, len);
          },
          [&] {
            (void)c.Flush(0);
            if (!c.Wait(0).ok()) ok = false;
          });
      Window whole;
      whole.len = n * len;
      whole.dev = {pool};
      auto contig = Time(
          whole,
          [&](size_t, uint8_t* dev) {
            (void)cudaMemcpyAsync(to_host ? static_cast<void*>(ref_half) : dev,
                                  to_host ? static_cast<const void*>(dev) : ref_half, whole.len,
                                  cudaMemcpyDefault, s);
          },
          [&] { CHECK_CUDA(cudaStreamSynchronize(s)); });
      Row("ref", name, len, n, ref, 0);
      Row("engine", name, len, n, eng, Pct(ref, 50));
      Row("contig", name, len * n, 1, contig, Pct(ref, 50));
    }
    std::printf("verify %zu B: %s\n", len, verified ? "PASS" : "FAIL");
  }
  std::printf("%s\n", ok ? "ALL PASS" : "SOME FAILED");
  return ok ? 0 : 1;
}
