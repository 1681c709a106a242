// CudaProxy: the host side of one lane's resident proxy kernel (gpu/proxy_kernel.cu):
// its ring and flags in pinned host memory, its stream, and its lifetime. The
// kernel is started on the lane's first small transfer (by the posting thread
// when the previous launch has returned) and stopped (an exit entry) after the
// lane had no small transfer for AgentOptions::cuda_proxy_idle_exit; while small
// transfers flow it is renewed (exit, then a fresh launch) every kMaxRun. A
// caller's cudaDeviceSynchronize or cudaFree, which wait for every kernel
// launched before they were called, therefore wait at most about
// max(idle exit, kMaxRun).
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
  // A kernel that has run this long is renewed at the next idle moment of its
  // lane's issue thread (bounds how long a caller's device-wide sync waits).
  static constexpr auto kMaxRun = std::chrono::milliseconds(2);

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
  // When the running kernel was launched. REQUIRES: the lane's issue mutex held.
  std::chrono::steady_clock::time_point launched_at() const { return launched_at_; }
  // Not running and the previous launch has returned (one non-blocking stream
  // query): Submit will start the kernel without waiting. REQUIRES: the issue mutex.
  bool Exited() const;

  // Queues segments host[sb, se) (copied into the ring's pinned segment lists:
  // the proxy never reads memory allocated after it started); the proxy stores
  // `value` into done[(value - 1) % kProxyRing]. Starts the kernel first when it
  // is not running. REQUIRES: 1 <= se - sb <= gpu::kProxyMaxSegs.
  Status Submit(const gpu::CopySeg* host, uint32_t sb, uint32_t se, uint64_t value,
                std::chrono::milliseconds timeout);
  // Asks a running kernel to exit after the entries before (it needs no wait).
  void Quiesce();
  // Replaces a running kernel by a fresh launch: the old one exits after its
  // entries (waited for, up to `timeout`), the new one serves the next entry.
  // A caller's device-wide sync waits for the old kernel only.
  Status Renew(std::chrono::milliseconds timeout);
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
  Status Start(std::chrono::milliseconds timeout);  // launches; REQUIRES: !running()
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
  std::chrono::steady_clock::time_point launched_at_{};
  std::atomic<bool> running_{false};  // a launch has not been sent its exit entry
  bool wedged_ = false;               // the kernel did not exit: leak, never free
  std::atomic<uint64_t> uses_{0};      // copy entries submitted (the lane's idle clock watches it)
};

}  // namespace kvlane::core
