// cuda_sync_probe: which CUDA runtime calls wait for a kernel that is still
// running (a resident proxy), and whether a launch from another thread gets
// through while such a call waits. The cuda transport's proxy renewal relies
// on the answer: a successor is launched while callers may sit in a
// device-wide synchronizing call.
//
// For each call X: a spinning kernel starts on its own stream; thread A calls
// X; 30 ms later thread B issues call Y (a kernel launch, a stream query, an
// async copy); 300 ms after the spinner started, a watchdog releases it. The
// table says when X and Y returned, relative to the release (negative: before
// it, so they did not wait for the spinner).
//   usage: cuda_sync_probe
#include <cuda_runtime.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

__global__ void Spin(volatile uint32_t* flag) {
  while (*flag == 0) {
  }
}
__global__ void Nop() {}

double Ms(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

struct Call {
  std::string name;
  std::function<cudaError_t()> fn;
};

struct Ctx {
  uint32_t* flag = nullptr;  // pinned host, mapped
  cudaStream_t spin = nullptr, other = nullptr, third = nullptr;
  void* dev_a = nullptr;
  void* dev_b = nullptr;  // 1 MiB
  std::vector<uint8_t> pageable = std::vector<uint8_t>(1 << 20, 1);
  void* pinned = nullptr;  // 1 MiB
};

// One cell: X on thread A, Y on thread B after 30 ms; returns false on a CUDA error.
bool Cell(Ctx& c, const Call& x, const Call& y) {
  *reinterpret_cast<volatile uint32_t*>(c.flag) = 0;
  Spin<<<1, 32, 0, c.spin>>>(c.flag);
  if (cudaGetLastError() != cudaSuccess) return false;
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the spinner runs
  const Clock::time_point t0 = Clock::now();
  const Clock::time_point release = t0 + std::chrono::milliseconds(300);
  std::thread watchdog([&] {
    std::this_thread::sleep_until(release);
    *reinterpret_cast<volatile uint32_t*>(c.flag) = 1;
  });
  Clock::time_point x_done, y_done;
  cudaError_t xe = cudaSuccess, ye = cudaSuccess;
  std::thread a([&] {
    xe = x.fn();
    x_done = Clock::now();
  });
  std::this_thread::sleep_until(t0 + std::chrono::milliseconds(30));
  ye = y.fn();
  y_done = Clock::now();
  a.join();
  watchdog.join();
  cudaError_t se = cudaDeviceSynchronize();
  std::printf("| %-28s | %-22s | %9.1f | %9.1f | %s\n", x.name.c_str(), y.name.c_str(), Ms(release, x_done),
              Ms(release, y_done),
              xe == cudaSuccess && ye == cudaSuccess && se == cudaSuccess ? "ok"
                                                                          : cudaGetErrorString(xe != cudaSuccess ? xe : ye != cudaSuccess ? ye : se));
  return se == cudaSuccess;
}

int Main() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::printf("cuda_sync_probe: no CUDA device\n");
    return 77;
  }
  cudaSetDevice(0);
  Ctx c;
  cudaHostAlloc(reinterpret_cast<void**>(&c.flag), 64, cudaHostAllocMapped);
  cudaStreamCreateWithFlags(&c.spin, cudaStreamNonBlocking);
  cudaStreamCreateWithFlags(&c.other, cudaStreamNonBlocking);
  cudaStreamCreateWithFlags(&c.third, cudaStreamNonBlocking);
  cudaMalloc(&c.dev_b, 1 << 20);
  cudaHostAlloc(&c.pinned, 1 << 20, cudaHostAllocDefault);
  // The calls thread A makes (each may or may not wait for the spinner).
  std::vector<Call> xs = {
      {"cudaDeviceSynchronize", [] { return cudaDeviceSynchronize(); }},
      {"cudaFree",
       [&] {
         void* p = nullptr;
         cudaError_t e = cudaMalloc(&p, 1 << 20);
         return e != cudaSuccess ? e : cudaFree(p);
       }},
      {"cudaMalloc 1 MiB", [&] { return cudaMalloc(&c.dev_a, 1 << 20); }},
      {"cudaFreeHost",
       [&] {
         void* p = nullptr;
         cudaError_t e = cudaHostAlloc(&p, 4096, cudaHostAllocMapped);
         return e != cudaSuccess ? e : cudaFreeHost(p);
       }},
      {"cudaFreeAsync + query",
       [&] {
         void* p = nullptr;
         cudaError_t e = cudaMallocAsync(&p, 1 << 20, c.third);
         if (e == cudaSuccess) e = cudaFreeAsync(p, c.third);
         return e != cudaSuccess ? e : cudaStreamSynchronize(c.third);
       }},
      {"cudaStreamDestroy (idle)",
       [&] {
         cudaStream_t s = nullptr;
         cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
         return e != cudaSuccess ? e : cudaStreamDestroy(s);
       }},
      {"cudaStreamSynchronize other", [&] { return cudaStreamSynchronize(c.other); }},
      // Staging copies as a benchmark or framework makes them (lanebench's
      // Upload and Download): pageable and pinned host memory, both ways.
      {"H2D 1 MiB pageable + sync",
       [&] {
         cudaError_t e =
             cudaMemcpyAsync(c.dev_b, c.pageable.data(), 1 << 20, cudaMemcpyHostToDevice, c.third);
         return e != cudaSuccess ? e : cudaStreamSynchronize(c.third);
       }},
      {"H2D 4 KiB pageable + sync",
       [&] {
         cudaError_t e =
             cudaMemcpyAsync(c.dev_b, c.pageable.data(), 4096, cudaMemcpyHostToDevice, c.third);
         return e != cudaSuccess ? e : cudaStreamSynchronize(c.third);
       }},
      {"D2H 1 MiB pageable cudaMemcpy",
       [&] { return cudaMemcpy(c.pageable.data(), c.dev_b, 1 << 20, cudaMemcpyDeviceToHost); }},
      {"H2D 1 MiB pinned + sync",
       [&] {
         cudaError_t e =
             cudaMemcpyAsync(c.dev_b, c.pinned, 1 << 20, cudaMemcpyHostToDevice, c.third);
         return e != cudaSuccess ? e : cudaStreamSynchronize(c.third);
       }},
  };
  // The calls thread B makes while A may be waiting.
  std::vector<Call> ys = {
      {"launch (other stream)", [&] {
         Nop<<<1, 1, 0, c.other>>>();
         return cudaGetLastError();
       }},
      {"cudaStreamQuery other", [&] {
         cudaError_t e = cudaStreamQuery(c.other);
         return e == cudaErrorNotReady ? cudaSuccess : e;
       }},
      {"cudaMemcpyAsync D2D", [&] {
         return cudaMemcpyAsync(c.dev_b, static_cast<char*>(c.dev_b) + (512 << 10), 4096, cudaMemcpyDefault,
                                c.other);
       }},
  };
  std::printf("cuda_sync_probe: thread A calls X while a kernel spins; thread B calls Y 30 ms later;\n"
              "the kernel is released at 300 ms. Times in ms relative to the release (negative: returned before,\n"
              "so the call did not wait for the running kernel).\n");
  std::printf("| %-28s | %-22s | %9s | %9s | status\n", "X (thread A)", "Y (thread B)", "X ret ms", "Y ret ms");
  int bad = 0;
  for (const Call& x : xs) {
    for (const Call& y : ys) {
      if (!Cell(c, x, y)) ++bad;
      if (c.dev_a != nullptr) cudaFree(c.dev_a), c.dev_a = nullptr;
    }
  }
  return bad == 0 ? 0 : 1;
}

}  // namespace

int main() { return Main(); }
