// cuda_copier_probe: what tcp's device staging costs per window, without the
// socket. One window = the copier's half (1 MiB) filled from (ToHost) or
// drained into (ToDevice) device ranges of one size, scattered over a pool
// (shuffled slots, so no two ranges are adjacent), as tcp moves a paged KV
// list. Timed on the host from the first queued range to Wait's return
// (p50 / p99 of 200 windows after 20 warm-ups), for:
//   batch:   the shipped copier as StagingCopy::kBatch (the default: copy
//            engines, one batch call per window but for short ranges into
//            device memory, one call each);
//   kernel:  the shipped copier as StagingCopy::kKernel (one copy kernel per
//            window for ranges under 64 KiB);
//   ref:     one cudaMemcpyAsync per range on one stream, then a stream
//            synchronize: StagingCopy::kEach, session 11's copier;
//   contig:  one cudaMemcpyAsync of the whole window (the copy engine's
//            ceiling for the bytes).
// Each copier is verified once per size (every byte of the window, both ways).
// --threads T --procs P: P processes of T threads each (every one with its own
// copier, stream and pool) run the same rows at once, each timed phase begun
// together (a barrier in shared memory); worker 0 prints. Several staging
// threads of one process is tcp's lanes; two processes on one GPU is both
// kvbench ranks on a one-GPU machine, whose kernels the GPU time-slices.
// --busy 1: each process also keeps every SM busy with a low-priority spin
// kernel (~1 ms per launch, back to back), as a serving engine's forward pass
// would: the kernel then competes for SMs, the copy engines do not.
//   usage: cuda_copier_probe [--device D] [--threads T] [--procs P] [--busy 0|1]
#include <cuda_runtime.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "percentile.h"
#include "transport/cuda/cuda_copier.h"

namespace {

using kvlane::StagingCopy;
using kvlane::Status;
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

// Occupies its SM share for ~`ns` (the global timer), touching nothing.
__global__ void Spin(uint64_t ns) {
  uint64_t t0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  for (;;) {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    if (t - t0 > ns) break;
  }
}

// Launches Spin over every SM, back to back on a lowest-priority stream, until
// *stop.
void Busy(int device, const std::atomic<bool>* stop) {
  CHECK_CUDA(cudaSetDevice(device));
  int lo = 0, hi = 0, sms = 0;
  CHECK_CUDA(cudaDeviceGetStreamPriorityRange(&lo, &hi));
  CHECK_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  cudaStream_t s;
  CHECK_CUDA(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, lo));
  while (!stop->load()) {
    for (int i = 0; i < 4; ++i) Spin<<<sms * 8, 256, 0, s>>>(1000000);  // 2,048 threads per SM: full
    CHECK_CUDA(cudaStreamSynchronize(s));
  }
}

// Every worker of every process begins each timed phase together.
pthread_barrier_t* g_phase = nullptr;

// Microseconds per window: queue every range of `w` with `queue`, then `wait`.
template <typename Queue, typename Wait>
std::vector<double> Time(const Window& w, Queue queue, Wait wait) {
  pthread_barrier_wait(g_phase);
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
  std::printf("%-8s %-9s %8zu %6zu %9.1f %9.1f %8.2f", what, dir, len, n, p50, Pct(us, 99),
              bytes / p50 / 1e3);
  if (ref_p50 > 0) std::printf("  %5.2fx ref", ref_p50 / p50);
  std::printf("\n");
}

// Checks a copier both ways over `w` once: device -> half equals the
// device bytes, half -> device lands them back after the device was cleared.
bool Verify(DeviceCopier& c, const Window& w, std::vector<uint8_t>& expect) {
  for (int dir = 0; dir < 2; ++dir) {
    // The fills run on the legacy stream, the copier's on its own non-blocking
    // ones: every fill lands before the first copy is queued.
    for (size_t i = 0; i < w.dev.size(); ++i) {
      if (dir == 0)
        CHECK_CUDA(cudaMemcpy(w.dev[i], expect.data() + i * w.len, w.len, cudaMemcpyHostToDevice));
      else
        CHECK_CUDA(cudaMemset(w.dev[i], 0, w.len));
    }
    CHECK_CUDA(cudaDeviceSynchronize());
    for (size_t i = 0; i < w.dev.size(); ++i) {
      const Status q = dir == 0 ? c.ToHost(0, i * w.len, w.dev[i], w.len)
                                : c.ToDevice(0, i * w.len, w.dev[i], w.len);
      if (!q.ok()) return false;
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

// One worker: its own copier, stream, window buffer and pool. Worker 0
// prints the table. Returns whether every verification and wait passed.
bool Worker(kvlane::core::DeviceStaging& staging, int device, int id) {
  CHECK_CUDA(cudaSetDevice(device));
  constexpr size_t kPool = 256u << 20;
  uint8_t* pool = nullptr;
  CHECK_CUDA(cudaMalloc(&pool, kPool));
  std::unique_ptr<DeviceCopier> copiers[2];
  const StagingCopy hows[2] = {StagingCopy::kBatch, StagingCopy::kKernel};
  for (int k = 0; k < 2; ++k) {
    auto made = staging.MakeCopier(pool, hows[k]);
    if (!made.ok()) {
      std::printf("copier: %s\n", made.status().ToString().c_str());
      std::exit(2);  // the other workers would wait at the barrier
    }
    copiers[k] = std::move(made).value();
  }
  DeviceCopier& c = *copiers[0];
  const size_t half = c.capacity();
  cudaStream_t s;
  CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  uint8_t* ref_half = nullptr;  // the reference's own pinned window
  CHECK_CUDA(cudaHostAlloc(&ref_half, half, cudaHostAllocPortable));
  std::mt19937_64 rng(7 + id);
  std::vector<uint8_t> expect(half);
  for (auto& b : expect) b = static_cast<uint8_t>(rng());
  const bool print = id == 0;
  bool ok = true;
  for (size_t len : {100ul, 4104ul, 22528ul, 37440ul, 65536ul, 262144ul}) {
    const Window w = Scatter(pool, kPool, half, len, rng);
    const size_t n = w.dev.size();
    bool verified = true;
    for (auto& k : copiers) verified = Verify(*k, w, expect) && verified;
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
      std::vector<double> eng[2];
      for (int k = 0; k < 2; ++k) {
        DeviceCopier& e = *copiers[k];
        eng[k] = Time(
            w,
            [&](size_t at, uint8_t* dev) {
              if (to_host)
                (void)e.ToHost(0, at, dev, len);
              else
                (void)e.ToDevice(0, at, dev, len);
            },
            [&] {
              (void)e.Flush(0);
              if (!e.Wait(0).ok()) ok = false;
            });
      }
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
      if (!print) continue;
      Row("ref", name, len, n, ref, 0);
      for (int k = 0; k < 2; ++k)
        Row(kvlane::StagingCopyName(hows[k]), name, len, n, eng[k], Pct(ref, 50));
      Row("contig", name, len * n, 1, contig, Pct(ref, 50));
    }
    if (print) std::printf("verify %zu B: %s\n", len, verified ? "PASS" : "FAIL");
  }
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  int device = 0, threads = 1, procs = 1, busy = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    const int v = std::atoi(argv[i + 1]);
    if (a == "--device") device = v;
    else if (a == "--threads") threads = std::max(1, v);
    else if (a == "--procs") procs = std::max(1, v);
    else if (a == "--busy")
      busy = v;
  }
  // Before any CUDA call: children are forked.
  void* shared = mmap(nullptr, sizeof(pthread_barrier_t), PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (shared == MAP_FAILED) return 2;
  g_phase = static_cast<pthread_barrier_t*>(shared);
  pthread_barrierattr_t attr;
  pthread_barrierattr_init(&attr);
  pthread_barrierattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
  pthread_barrier_init(g_phase, &attr, static_cast<unsigned>(threads * procs));
  int proc = 0;
  std::vector<pid_t> children;
  for (int p = 1; p < procs; ++p) {
    const pid_t pid = fork();
    if (pid == 0) {
      proc = p;
      break;
    }
    children.push_back(pid);
  }
  auto staging = kvlane::core::MakeCudaStaging();
  if (!staging) {
    std::printf("no GPU\n");
    return 1;
  }
  if (proc == 0)
    std::printf("copier probe, device %d, %d process(es) x %d thread(s), SMs busy: %s, window 1 MiB, "
                "p50/p99 us of %d windows (worker 0)\n%-7s %-9s %8s %6s %9s %9s %8s\n",
                device, procs, threads, busy != 0 ? "yes" : "no", kRuns, "copier", "direction", "range_B", "ranges",
                "p50_us", "p99_us", "GB/s");
  std::atomic<bool> ok{true}, stop{false};
  std::thread spinner;
  if (busy != 0) spinner = std::thread(Busy, device, &stop);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      if (!Worker(*staging, device, proc * threads + t)) ok = false;
    });
  for (auto& t : pool) t.join();
  stop = true;
  if (spinner.joinable()) spinner.join();
  if (proc != 0) return ok ? 0 : 1;
  for (pid_t pid : children) {
    int st = 0;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) ok = false;
  }
  std::printf("%s\n", ok ? "ALL PASS" : "SOME FAILED");
  return ok ? 0 : 1;
}
