// CudaProxy: the host side of one lane's resident proxy kernel (gpu/proxy_kernel.cu):
// its ring and flags in pinned host memory, its stream, and its lifetime. The
// kernel is started on the lane's first small transfer and stopped (an exit
// entry) after the lane has been idle for a while, so that a caller's
// cudaDeviceSynchronize or cudaFree waits at most that long.
//
// Thread-safety: Submit, Quiesce and Shutdown are called under the lane's issue
// mutex (Shutdown also by Close once the lane threads joined); the flag accessors
// (MirrorLatch, gpu_error, saw_latch, InjectFault) are safe from any thread.
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <cstdint>

#include "gpu/copy_types.h"
#include "kvlane/status.h"

namespace kvlane::core {

class CudaProxy {
 public:
  // The kernel exits after the lane has had no small transfer for this long.
  static constexpr auto kIdleExit = std::chrono::milliseconds(1);

  CudaProxy() = default;
  ~CudaProxy() { Free(); }
  CudaProxy(const CudaProxy&) = delete;
  CudaProxy& operator=(const CudaProxy&) = delete;

  // Allocates the ring and flags. `done` is the lane's kProxyRing pinned
  // completion words. REQUIRES: the channel's device is current; blocks >= 1.
  Status Init(int blocks, uint64_t* done, int priority);
  bool enabled() const { return ring_ != nullptr; }
  // Readable from any thread (the lane's spin policy); written under the lane's issue mutex.
  bool running() const { return running_.load(std::memory_order_relaxed); }
  uint64_t uses() const { return uses_.load(std::memory_order_relaxed); }  // entries submitted

  // Queues segments host[sb, se) (copied into the ring's pinned segment lists:
  // the proxy never reads memory allocated after it started); the proxy stores
  // `value` into done[(value - 1) % kProxyRing]. Starts the kernel first when it
  // is not running. REQUIRES: 1 <= se - sb <= gpu::kProxyMaxSegs.
  Status Submit(const gpu::CopySeg* host, uint32_t sb, uint32_t se, uint64_t value,
                std::chrono::milliseconds timeout);
  // Asks a running kernel to exit after the entries before (it needs no wait).
  void Quiesce();
  // Quiesces, then waits up to `timeout` for the kernel to return. A kernel
  // that does not (a wedged GPU) is left running and its memory is leaked.
  Status Shutdown(std::chrono::milliseconds timeout);
  cudaStream_t stream() const { return stream_; }
  // Frees the ring, flags and stream (nothing after a timed-out Shutdown).
  // REQUIRES: the kernel returned (Shutdown succeeded) or never ran.
  void Free();

  void MirrorLatch();           // the host latched: the proxy copies nothing more
  uint32_t gpu_error() const;   // nonzero once the proxy raised a GPU-side error
  bool saw_latch() const;       // the proxy has seen MirrorLatch()
  void InjectFault();           // tests: the proxy raises a GPU-side error

 private:
  void Write(const gpu::ProxyEntry& e);
  Status WaitExited(std::chrono::milliseconds timeout);

  gpu::ProxyEntry* ring_ = nullptr;   // pinned host (mapped)
  gpu::ProxyCtl* ctl_ = nullptr;      // pinned host (mapped)
  gpu::CopySeg* lists_ = nullptr;     // pinned host (mapped): kProxyMaxSegs per ring entry
  gpu::ProxyScratch* scratch_ = nullptr;  // device memory
  uint64_t* done_ = nullptr;          // pinned host, owned by the lane
  cudaStream_t stream_ = nullptr;
  int blocks_ = 1;
  uint64_t next_ = 0;                 // the next entry number
  std::atomic<bool> running_{false};  // a launch has not been sent its exit entry
  bool wedged_ = false;               // the kernel did not exit: leak, never free
  std::atomic<uint64_t> uses_{0};      // copy entries submitted (the lane's idle clock watches it)
};

}  // namespace kvlane::core
