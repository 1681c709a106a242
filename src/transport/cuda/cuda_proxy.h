// CudaProxy: the host side of one lane's resident proxy kernel (gpu/proxy_kernel.cu):
// its ring and flags in pinned host memory, its streams, and its lifetime.
//
// Lifetime. The kernel is started on the lane's first small transfer (by the
// posting thread when the previous launch has returned) and stopped (an exit
// entry) after the lane had no small transfer for
// AgentOptions::cuda_proxy_idle_exit. While it runs it is renewed every AgentOptions::cuda_proxy_renew_every (`renew_every`)
// without a gap: a successor is launched into the spare slot (its own stream),
// reports that it runs, and only then is the ring handed over (an exit entry
// for the predecessor, the next entry number for the successor). A caller's
// cudaDeviceSynchronize or cudaFree waits for the kernels launched before it
// was called, so at most about 2 x renew_every, and small transfers never wait for
// a launch during renewal.
//
// Thread-safety: Submit, Quiesce, HandOver and Shutdown are called under the lane's
// issue mutex (Shutdown also by Close once the lane threads joined); the flag
// accessors (MirrorLatch, gpu_error, saw_latch, InjectFault) are safe from any thread.
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
  static constexpr int kSlots = 2;

  CudaProxy() = default;
  ~CudaProxy() { Free(); }
  CudaProxy(const CudaProxy&) = delete;
  CudaProxy& operator=(const CudaProxy&) = delete;

  // Allocates the ring, flags and streams. `done` is the lane's kProxyRing
  // pinned completion words; a kernel that has run `renew_every` gets a
  // successor (zero: never). REQUIRES: the channel's device is current; blocks >= 1.
  Status Init(int blocks, uint64_t* done, int priority, std::chrono::microseconds renew_every);
  bool enabled() const { return ring_ != nullptr; }
  // Readable from any thread (the lane's spin policy); written under the lane's issue mutex.
  bool running() const { return running_.load(std::memory_order_relaxed); }
  uint64_t uses() const { return uses_.load(std::memory_order_relaxed); }  // entries submitted
  // Renewal has a step to take: readable from any thread without the issue mutex.
  bool renewal_due(std::chrono::steady_clock::time_point now) const {
    return running() && now.time_since_epoch().count() >= renew_at_.load(std::memory_order_relaxed);
  }

  // Queues segments host[sb, se) (copied into the ring's pinned segment lists:
  // the proxy never reads memory allocated after it started); the proxy stores
  // `value` into done[(value - 1) % kProxyRing]. Starts the kernel first when it
  // is not running. REQUIRES: 1 <= se - sb <= gpu::kProxyMaxSegs.
  Status Submit(const gpu::CopySeg* host, uint32_t sb, uint32_t se, uint64_t value,
                std::chrono::milliseconds timeout);
  // Asks the running kernel (and a successor waiting for its hand-over) to exit
  // after the entries before; needs no wait.
  void Quiesce();
  // Renewal, driven by the lane's issue thread once renewal_due(), never
  // waiting: LaunchSuccessor() needs no lock (posters never touch the spare
  // slot), then, once successor_alive(), HandOver() under the issue mutex.
  // REQUIRES: called by the lane's issue thread.
  Status LaunchSuccessor();
  bool successor_alive() const;
  // The successor takes the ring from the next entry on. REQUIRES: the issue
  // mutex; a successor was launched.
  void HandOver();
  // Not running and no launch left on either stream (non-blocking queries):
  // Submit will start the kernel without waiting.
  bool Exited() const;
  // Quiesces, then waits up to `timeout` for the kernels to return. A kernel
  // that does not (a wedged GPU) is left running and its memory is leaked.
  Status Shutdown(std::chrono::milliseconds timeout);
  cudaStream_t stream(int slot) const { return slots_[slot].stream; }
  // Frees the ring, flags and streams (nothing after a timed-out Shutdown).
  // REQUIRES: the kernels returned (Shutdown succeeded) or never ran.
  void Free();

  void MirrorLatch();           // the host latched: the proxy copies nothing more
  uint32_t gpu_error() const;   // nonzero once the proxy raised a GPU-side error
  bool saw_latch() const;       // the proxy has seen MirrorLatch()
  void InjectFault();           // tests: the proxy raises a GPU-side error

 private:
  struct Slot {
    cudaStream_t stream = nullptr;
    gpu::ProxyScratch* scratch = nullptr;  // device memory, one per slot (kernels overlap)
    uint64_t served = 0;                   // copy entries served by this slot's launches
  };

  // Writes the entry (the kernel runs). REQUIRES: as Submit.
  Status Queue(const gpu::CopySeg* host, uint32_t sb, uint32_t se, uint64_t value);
  Status Launch(int slot, bool handover);
  void ScheduleRenewal();  // renew_every_ from now, or never
  void RenewIn(std::chrono::steady_clock::duration d);
  void Retire(int slot);  // the kernel of `slot` stops serving: account its entries
  void ExitCurrent();     // an exit entry for the kernel serving the ring
  Status WaitExited(int slot, std::chrono::milliseconds timeout);
  void Write(const gpu::ProxyEntry& e);

  gpu::ProxyEntry* ring_ = nullptr;   // pinned host (mapped)
  gpu::ProxyCtl* ctl_ = nullptr;      // pinned host (mapped)
  gpu::CopySeg* lists_ = nullptr;     // pinned host (mapped): kProxyMaxSegs per ring entry
  uint64_t* done_ = nullptr;          // pinned host, owned by the lane
  Slot slots_[kSlots];
  int blocks_ = 1;
  std::chrono::microseconds renew_every_{1000};  // zero: never
  int cur_ = 0;                       // the slot whose kernel serves the ring
  // A successor was launched into the other slot. Written by the issue thread
  // (and Shutdown after it joined), read by it: no lock.
  bool pending_ = false;
  uint64_t next_ = 0;                 // the next entry number
  uint64_t uses_at_start_ = 0;        // uses() when the current kernel began serving
  // When renewal has a step to take: renew_every after the current kernel began serving, or at
  // once while a successor waits for its hand-over (steady_clock ticks).
  std::atomic<int64_t> renew_at_{INT64_MAX};
  std::atomic<bool> running_{false};  // a kernel serves the ring (no exit entry sent)
  bool wedged_ = false;               // a kernel did not exit: leak, never free
  std::atomic<uint64_t> uses_{0};     // copy entries submitted (the lane's idle clock watches it)
};

}  // namespace kvlane::core
