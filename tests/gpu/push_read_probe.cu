// cuda_push_read_probe: should a small READ be pushed by the GPU that holds the
// data rather than pulled by the initiator's GPU? A pull waits for an NVLink read
// round trip before its stores; a push's stores are posted (the 4 KiB WRITE
// takes 4.6 us, the READ 5.8, session 7).
//
// A child process (the target) allocates a buffer on GPU 1 and hands its
// legacy IPC handle over a pipe. This process (the initiator, GPU 0) opens it
// with GPU 0 current, as the cuda transport does. Questions:
//  1. Can a kernel this process launches on GPU 1 use that mapping, or one
//     from opening the handle again with GPU 1 current, and store into this
//     process's GPU 0 buffer (peer access 1 -> 0)? Checked by copying 4 KiB and
//     comparing. (Session 7, first version: the GPU-0-opened mapping faults on
//     GPU 1 with an illegal address.)
//  2. Doorbell -> 4 KiB READ -> record, a resident one-block kernel (256
//     threads copy 16 B each; thread 0 polls a doorbell in pinned host memory,
//     then fences at system scope and writes a record to pinned host memory):
//     "pull" runs on GPU 0 (loads over NVLink, local stores); "push" runs on
//     GPU 1 (local loads, stores over NVLink). The host times its write of k
//     to seeing record k, with a random 0-3 us wait before each write.
//  3. The engine's own proxy kernel (CudaProxy, GPU 0) on the same buffers:
//     WRITE (push) against READ (pull), Submit to the record landing.
#include <cuda_runtime.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "engine_proxy_timing.h"
#include "round_trip.h"

namespace {

constexpr uint64_t kExit = ~0ull;
constexpr int kCopiers = 256;  // 16 B each: 4 KiB

__global__ void Responder(const volatile uint64_t* bell, volatile uint64_t* record,
                          const uint4* src, uint4* dst) {
  __shared__ uint64_t k;
  uint64_t seen = 0;
  for (;;) {
    if (threadIdx.x == 0) {
      uint64_t v;
      do {
        v = *bell;
      } while (v == seen);
      k = v;
    }
    __syncthreads();
    const uint64_t v = k;
    if (v == kExit) return;
    seen = v;
    dst[threadIdx.x] = src[threadIdx.x];
    __syncthreads();
    if (threadIdx.x == 0) {
      __threadfence_system();
      *record = v;
    }
  }
}

__global__ void CopyOnce(const uint4* src, uint4* dst) { dst[threadIdx.x] = src[threadIdx.x]; }

const char* Err(cudaError_t e) { return cudaGetErrorString(e); }

// Child: a buffer on GPU 1 filled with a pattern; its IPC handle to `out`;
// waits for one byte on `in`, then exits.
int Target(int in, int out) {
  cudaSetDevice(1);
  void* p = nullptr;
  if (cudaMalloc(&p, 1 << 20) != cudaSuccess) return 1;
  std::vector<uint32_t> h(1 << 18);
  for (size_t i = 0; i < h.size(); ++i) h[i] = static_cast<uint32_t>(i * 2654435761u);
  cudaMemcpy(p, h.data(), 1 << 20, cudaMemcpyHostToDevice);
  cudaIpcMemHandle_t handle{};
  if (cudaIpcGetMemHandle(&handle, p) != cudaSuccess) return 1;
  if (write(out, &handle, sizeof(handle)) != sizeof(handle)) return 1;
  char c;
  (void)read(in, &c, 1);
  cudaFree(p);
  return 0;
}

// Doorbell -> 4 KiB READ -> record rounds (TimeRoundTrips) of a Responder on
// `dev`, printed as one line.
void Time(const char* name, int dev, const uint4* src, uint4* dst, uint64_t* bell,
          uint64_t* record) {
  *bell = 0;
  *record = 0;
  cudaSetDevice(dev);
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  Responder<<<1, kCopiers, 0, s>>>(bell, record, src, dst);
  const kvlane::test::RoundTrips r = kvlane::test::TimeRoundTrips(
      5,
      [&](uint64_t k) {
        __atomic_store_n(bell, k, __ATOMIC_RELEASE);
        return std::string();
      },
      [&](uint64_t k) { return __atomic_load_n(record, __ATOMIC_ACQUIRE) == k; });
  __atomic_store_n(bell, kExit, __ATOMIC_RELEASE);
  const cudaError_t e = cudaStreamSynchronize(s);
  cudaStreamDestroy(s);
  kvlane::test::PrintRoundTrips(name, 36, r, Err(e));
}

}  // namespace

int main() {
  int down[2], up[2];
  if (pipe(down) != 0 || pipe(up) != 0) return 1;
  const pid_t pid = fork();  // before any CUDA call in this process
  if (pid == 0) {
    close(down[1]);
    close(up[0]);
    _exit(Target(down[0], up[1]));
  }
  close(down[0]);
  close(up[1]);
  int ndev = 0;
  cudaGetDeviceCount(&ndev);
  cudaIpcMemHandle_t handle{};
  if (ndev < 2 || read(up[0], &handle, sizeof(handle)) != sizeof(handle)) {
    std::printf("cuda_push_read_probe: needs 2 GPUs and the target's handle\n");
    return 1;
  }
  cudaSetDevice(0);
  void* remote = nullptr;  // GPU 1 memory of the target, opened with GPU 0 current
  cudaError_t e = cudaIpcOpenMemHandle(&remote, handle, cudaIpcMemLazyEnablePeerAccess);
  std::printf("cudaIpcOpenMemHandle (GPU 0 current): %s\n", Err(e));
  uint4* local = nullptr;  // GPU 0, this process
  cudaMalloc(&local, 1 << 20);
  uint64_t* host = nullptr;  // [0] doorbell, [8] record
  cudaHostAlloc(&host, 4096, cudaHostAllocMapped | cudaHostAllocPortable);
  int rc = 0;
  cudaSetDevice(1);
  cudaError_t p = cudaDeviceEnablePeerAccess(0, 0);
  std::printf("GPU 1 -> GPU 0 peer access: %s\n", Err(p));
  // The same handle opened a second time, with GPU 1 current.
  void* remote1 = nullptr;
  e = cudaIpcOpenMemHandle(&remote1, handle, cudaIpcMemLazyEnablePeerAccess);
  std::printf("cudaIpcOpenMemHandle again (GPU 1 current): %s, %s address\n", Err(e),
              remote1 == remote ? "the same" : "another");
  (void)cudaGetLastError();
  // 1. A kernel on GPU 1 reading that mapping and storing into GPU 0.
  auto copy_check = [&](const void* src, const char* what) {
    cudaMemset(local, 0, 4096);
    CopyOnce<<<1, kCopiers>>>(static_cast<const uint4*>(src), local);
    const cudaError_t k = cudaDeviceSynchronize();
    std::vector<uint32_t> got(1024);
    cudaMemcpy(got.data(), local, 4096, cudaMemcpyDeviceToHost);
    int bad = 0;
    for (size_t i = 0; i < got.size(); ++i) bad += got[i] != static_cast<uint32_t>(i * 2654435761u);
    std::printf("kernel on GPU 1 through %s: %s, data %s\n", what, Err(k), bad ? "WRONG" : "exact");
    return k == cudaSuccess && bad == 0;
  };
  if (e == cudaSuccess && copy_check(remote1, "the GPU-1-opened mapping")) {
    Time("pull: kernel on GPU 0", 0, static_cast<const uint4*>(remote), local, host, host + 8);
    Time("push: kernel on GPU 1", 1, static_cast<const uint4*>(remote1), local, host, host + 8);
    Time("pull: kernel on GPU 0", 0, static_cast<const uint4*>(remote), local, host, host + 8);
    Time("push: kernel on GPU 1", 1, static_cast<const uint4*>(remote1), local, host, host + 8);
    for (int i = 0; i < 2; ++i) {
      kvlane::test::TimeEngineProxy("engine proxy on GPU 0, WRITE (push)", 36, 9,
                                    reinterpret_cast<uint64_t>(local),
                                    reinterpret_cast<uint64_t>(remote));
      kvlane::test::TimeEngineProxy("engine proxy on GPU 0, READ (pull)", 36, 9,
                                    reinterpret_cast<uint64_t>(remote),
                                    reinterpret_cast<uint64_t>(local));
    }
  } else {
    rc = 1;
  }
  // Last (an illegal access ends GPU 1's context): the mapping opened with GPU 0 current.
  cudaSetDevice(1);
  (void)copy_check(remote, "the GPU-0-opened mapping");
  cudaSetDevice(0);
  cudaIpcCloseMemHandle(remote);
  (void)write(down[1], "x", 1);
  int status = 0;
  waitpid(pid, &status, 0);
  return rc;
}
