// CudaProxy: the host side of one lane's resident proxy kernel (gpu/proxy_kernel.cu):
// its ring and flags in pinned host memory, its streams, and its lifetime.
//
// Lifetime. The proxy is a chain of launches (generations 1, 2, ..., the two
// streams taking turns) that hand the ring to each other on the GPU (see
// gpu::ProxyCtl). The first launch of a chain is made by the posting thread of
// the lane's first small transfer, once the previous chain has returned. The
// issue thread then tends it (Tend): every AgentOptions::cuda_proxy_renew_every
// it launches a successor, which reports alive; the running kernel then stops
// right after its next entry (one block; or after 20 us without one) and the
// successor serves from there, with no request waiting for a launch. A kernel
// also stops on its own after twice that (or
// twice cuda_proxy_idle_exit without renewal) and Tend relaunches at once: a
// caller's cudaFree holds back every launch until the running kernels return,
// so no kernel may wait for the host to be told to stop. The chain ends with an
// exit entry (Quiesce) after cuda_proxy_idle_exit without a small transfer.
// So a caller's cudaDeviceSynchronize waits about renew_every at most (plus
// ~20 us), and a cudaFree (or anything else that holds back launches) at most
// twice that.
//
// Thread-safety: Submit and Quiesce are called under the lane's issue mutex,
// Tend by the issue thread only while running(), Shutdown by Close once the
// lane threads joined; the flag accessors (MirrorLatch, gpu_error, saw_latch,
// InjectFault) are safe from any thread.
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
  using TimePoint = std::chrono::steady_clock::time_point;

  CudaProxy() = default;
  ~CudaProxy() { Free(); }
  CudaProxy(const CudaProxy&) = delete;
  CudaProxy& operator=(const CudaProxy&) = delete;

  // Allocates the ring, flags and streams. `done` is the lane's kProxyRing
  // pinned completion words; a successor is launched every `renew_every` (zero:
  // only when a kernel left on its own, after `max_life`). `records`: the
  // request slots' records as the GPU addresses them (nullptr: the proxy
  // publishes no record itself), `record_slots` of them.
  // REQUIRES: the channel's device is current; blocks >= 1; max_life > 0.
  Status Init(int blocks, uint64_t* done, int priority, std::chrono::microseconds renew_every,
              std::chrono::microseconds max_life, uint8_t* records, uint32_t record_slots);
  bool enabled() const { return ring_ != nullptr; }
  // A chain runs (no exit entry sent). Readable from any thread (the lane's
  // spin policy); written under the lane's issue mutex.
  bool running() const { return running_.load(std::memory_order_relaxed); }
  uint64_t uses() const { return uses_.load(std::memory_order_relaxed); }  // entries submitted
  // Launches made so far (the newest generation; chains go on counting).
  uint64_t generation() const { return gen_.load(std::memory_order_relaxed); }

  // Queues segments host[sb, se) (copied into the ring's pinned segment lists:
  // the proxy never reads memory allocated after it started); the proxy stores
  // `value` into done[(value - 1) % kProxyRing] and, when `record` is nonzero
  // and the copy was made, generation `gen` with status ok into the record of
  // slot record - 1, both behind one fence, in either order. Starts a chain
  // first when none runs. `dst_on_device`: every destination is memory of the
  // proxy's GPU (XferTable::dst_on_device), so a device-scope fence will do.
  // REQUIRES: 1 <= se - sb <= gpu::kProxyMaxSegs.
  Status Submit(const gpu::CopySeg* host, uint32_t sb, uint32_t se, uint64_t value, uint32_t record,
                uint32_t gen, bool dst_on_device, std::chrono::milliseconds timeout);
  // Launches a successor when renewal is due or the serving kernel left on its
  // own. Never waits for the GPU, but the launch itself may be held back inside
  // CUDA (a caller's cudaFree): the running kernel then leaves on its own.
  // REQUIRES: the lane's issue thread; the channel's device is current.
  Status Tend();
  // Ends the chain after the entries before (an exit entry); needs no wait.
  void Quiesce();
  // Not running and no launch left on either stream (non-blocking queries):
  // Submit will start a chain without waiting.
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
    cudaStream_t stream = nullptr;         // launches of generations of this parity
    gpu::ProxyScratch* scratch = nullptr;  // device memory (the two streams' kernels overlap)
  };

  // Writes the entry (the kernel runs). REQUIRES: as Submit.
  Status Queue(const gpu::CopySeg* host, uint32_t sb, uint32_t se, uint64_t value, uint32_t record,
               uint32_t gen, bool dst_on_device);
  // Launches generation `gen`; `start` (a chain's first launch): the hand-off
  // record it starts from, which no launch writes.
  Status Launch(uint64_t gen, const uint64_t* start = nullptr);
  uint32_t handoff_gen16() const;
  Status WaitExited(int slot, std::chrono::milliseconds timeout);
  void Write(const gpu::ProxyEntry& e);

  gpu::ProxyEntry* ring_ = nullptr;   // pinned host (mapped)
  gpu::ProxyCtl* ctl_ = nullptr;      // pinned host (mapped)
  gpu::CopySeg* lists_ = nullptr;     // pinned host (mapped): kProxyMaxSegs per ring entry
  uint64_t lists_dev_ = 0;            // lists_ as the GPU addresses it
  gpu::ProxyChain* chain_ = nullptr;  // device memory: the hand-off record and alive report
  uint64_t* done_ = nullptr;          // pinned host, owned by the lane
  Slot slots_[kSlots];
  int blocks_ = 1;
  std::chrono::microseconds renew_every_{1000};  // zero: never
  uint64_t max_life_ns_ = 0;
  uint8_t* records_ = nullptr;        // mapped host: request records (see Init)
  uint32_t record_slots_ = 0;
  // Written per entry by the posting side: a line of their own, apart from
  // `running_`, which the lane's threads poll.
  alignas(64) uint64_t next_ = 0;  // the next entry number
  std::atomic<uint64_t> uses_{0};  // copy entries submitted (the lane's idle clock watches it)
  // The newest launched generation (0: none yet). Written by Submit (no chain
  // running) and Tend (a chain running): never at once.
  alignas(64) std::atomic<uint64_t> gen_{0};
  std::atomic<bool> running_{false};  // a chain serves the ring (no exit entry sent)
  bool wedged_ = false;               // a kernel did not exit: leak, never free
  uint64_t serving_noted_ = 0;        // Tend: the generation whose take-over set renew_at_
  // When the next successor is due; max while one waits. Tend's and Quiesce's
  // (the issue thread, or Shutdown once it joined).
  TimePoint renew_at_ = TimePoint::max();
};

}  // namespace kvlane::core
