// cuda_bar_doorbell_probe: can the host ring a resident kernel's doorbell in
// the GPU's own memory instead of pinned host memory? The proxy today polls a
// ring entry in pinned host memory: each poll is a PCIe read (a round trip of
// 1.0-1.2 us on the H200 leases), and an entry is seen up to two round trips
// after it lands. A doorbell in device memory that the host writes through a
// BAR1 mapping would be seen at L2 latency after the posted write lands.
//
// The mapping: cuMemGetHandleForAddressRange(DMA_BUF_FD) of a cudaMalloc
// range, then mmap of the dma-buf fd (with flags 0 and with
// CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE). The probe prints what each step
// returns. If a mapping works, it checks that host writes reach the GPU and
// GPU writes reach the host through it, then times a doorbell round trip: a
// one-thread resident kernel waits for doorbell == k and writes record k into
// pinned host memory (fence.sc.sys first); the host times from its write of k
// to seeing record k, with a random 0-3 us wait before each write. Doorbells:
// pinned host memory (today's) and device memory through the mapping.
#include <cuda.h>
#include <cuda_runtime.h>
#include <emmintrin.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "round_trip.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr uint64_t kExit = ~0ull;
constexpr size_t kBytes = 2 << 20;

__global__ void Responder(const volatile uint64_t* bell, volatile uint64_t* record) {
  uint64_t seen = 0;
  for (;;) {
    uint64_t v;
    do {
      v = *bell;
    } while (v == seen);
    if (v == kExit) return;
    seen = v;
    __threadfence_system();
    *record = v;
  }
}

__global__ void WritePattern(uint64_t* p, uint64_t n, uint64_t salt) {
  for (uint64_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    p[i] = i ^ salt;
}

// Host side of one doorbell: the store of k and what makes it leave the core.
void Ring(uint64_t* bell, uint64_t k, bool device) {
  if (device) {
    *reinterpret_cast<volatile uint64_t*>(bell) = k;
    _mm_sfence();  // a write-combining mapping holds stores until flushed
  } else {
    __atomic_store_n(bell, k, __ATOMIC_RELEASE);
  }
}

// Doorbell -> record rounds (TimeRoundTrips), printed as one line.
void Time(const char* name, uint64_t* bell_host_view, const uint64_t* bell_dev_view, bool device,
          uint64_t* record) {
  *record = 0;
  Ring(bell_host_view, 0, device);
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  Responder<<<1, 1, 0, s>>>(bell_dev_view, record);
  const kvlane::test::RoundTrips r = kvlane::test::TimeRoundTrips(
      7,
      [&](uint64_t k) {
        Ring(bell_host_view, k, device);
        return std::string();
      },
      [&](uint64_t k) { return __atomic_load_n(record, __ATOMIC_ACQUIRE) == k; });
  Ring(bell_host_view, kExit, device);
  const cudaError_t e = cudaStreamSynchronize(s);
  cudaStreamDestroy(s);
  kvlane::test::PrintRoundTrips(name, 32, r, cudaGetErrorString(e));
}

}  // namespace

int main() {
  cudaSetDevice(0);
  cudaFree(nullptr);
  CUdevice dev;
  cuDeviceGet(&dev, 0);
  int dmabuf = -1;
  cuDeviceGetAttribute(&dmabuf, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, dev);
  std::printf("CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED = %d\n", dmabuf);

  uint64_t* pinned = nullptr;  // [0]: host doorbell, [8]: record
  cudaHostAlloc(reinterpret_cast<void**>(&pinned), 4096,
                cudaHostAllocMapped | cudaHostAllocPortable);
  std::memset(pinned, 0, 4096);
  uint64_t* record = pinned + 8;
  Time("doorbell in pinned host memory", pinned, pinned, false, record);

  void* d = nullptr;
  if (cudaMalloc(&d, kBytes) != cudaSuccess) return 1;
  cudaMemset(d, 0, kBytes);
  cudaDeviceSynchronize();
  int rc = 0;
  for (unsigned long long flags :
       {0ull, static_cast<unsigned long long>(CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE)}) {
    int fd = -1;
    CUresult r = cuMemGetHandleForAddressRange(&fd, reinterpret_cast<CUdeviceptr>(d), kBytes,
                                               CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, flags);
    const char* rn = nullptr;
    cuGetErrorName(r, &rn);
    std::printf("flags %llu: cuMemGetHandleForAddressRange = %s, fd %d\n", flags, rn ? rn : "?",
                fd);
    if (r != CUDA_SUCCESS) continue;
    void* m = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
      std::printf("flags %llu: mmap of the dma-buf: %s\n", flags, std::strerror(errno));
      close(fd);
      continue;
    }
    std::printf("flags %llu: mmap of the dma-buf: ok at %p\n", flags, m);
    auto* h = static_cast<uint64_t*>(m);
    // Host -> GPU: the host writes, a copy to the host reads it back through CUDA.
    for (int i = 0; i < 512; ++i) h[1024 + i] = 0xabc000ull + i;
    _mm_sfence();
    std::vector<uint64_t> back(512);
    cudaMemcpy(back.data(), static_cast<uint64_t*>(d) + 1024, 512 * 8, cudaMemcpyDeviceToHost);
    int bad = 0;
    for (int i = 0; i < 512; ++i) bad += back[i] != 0xabc000ull + i;
    // GPU -> host: a kernel writes, the host reads through the mapping.
    WritePattern<<<4, 128>>>(static_cast<uint64_t*>(d) + 4096, 512, 0x5a5a);
    cudaDeviceSynchronize();
    int bad2 = 0;
    for (int i = 0; i < 512; ++i)
      bad2 += reinterpret_cast<volatile uint64_t*>(h)[4096 + i] != (uint64_t(i) ^ 0x5a5a);
    std::printf("flags %llu: host writes seen by the GPU: %s; GPU writes seen by the host: %s\n",
                flags, bad ? "FAIL" : "PASS", bad2 ? "FAIL" : "PASS");
    if (bad == 0 && bad2 == 0) {
      const auto t0 = Clock::now();
      uint64_t sum = 0;
      for (int i = 0; i < 1000; ++i)
        sum += reinterpret_cast<volatile uint64_t*>(h)[4096 + (i % 512)];
      std::printf("flags %llu: host read through the mapping: %.2f us each (sum %llu)\n", flags,
                  std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / 1000,
                  static_cast<unsigned long long>(sum));
      char name[64];
      std::snprintf(name, sizeof(name), "doorbell in device memory (f%llu)", flags);
      Time(name, h, static_cast<uint64_t*>(d), true, record);
      Time("doorbell in pinned host memory", pinned, pinned, false, record);
    } else {
      rc = 1;
    }
    munmap(m, kBytes);
    close(fd);
  }
  cudaFree(d);
  cudaFreeHost(pinned);
  return rc;
}
