#include "transport/cuda/cuda_proxy.h"

#include <atomic>
#include <cstring>
#include <thread>

#include "gpu/copy_launch.h"
#include "transport/cuda/cuda_check.h"

namespace kvlane::core {

void CudaProxy::Free() {
  if (wedged_) return;  // the kernel may still read these; freeing would also block
  for (Slot& s : slots_) {
    if (s.stream) (void)cudaStreamDestroy(s.stream);
    if (s.scratch) (void)cudaFree(s.scratch);
    s = Slot{};
  }
  if (chain_) (void)cudaFree(chain_);
  chain_ = nullptr;
  if (ring_) (void)cudaFreeHost(ring_);
  if (ctl_) (void)cudaFreeHost(ctl_);
  if (lists_) (void)cudaFreeHost(lists_);
  ring_ = nullptr, ctl_ = nullptr, lists_ = nullptr, lists_dev_ = 0;
  running_.store(false, std::memory_order_relaxed);
}

Status CudaProxy::Init(int blocks, uint64_t* done, int priority, std::chrono::microseconds renew_every,
                       std::chrono::microseconds max_life, uint8_t* records, uint32_t record_slots) {
  blocks_ = blocks;
  records_ = records;
  record_slots_ = record_slots;
  renew_every_ = renew_every;
  max_life_ns_ = static_cast<uint64_t>(std::chrono::nanoseconds(max_life).count());
  done_ = done;
  // Zeroed once (see gpu::ProxyScratch), on the proxy's own streams and waited
  // for: a cudaMemset of device memory may return before it is done, and the
  // non-blocking proxy streams do not wait for the legacy stream; a late one
  // could clear a hand-off record the successor waits for.
  for (Slot& s : slots_) {
    KVLANE_CUDA(cudaStreamCreateWithPriority(&s.stream, cudaStreamNonBlocking, priority));
    KVLANE_CUDA(cudaMalloc(reinterpret_cast<void**>(&s.scratch), sizeof(gpu::ProxyScratch)));
    KVLANE_CUDA(cudaMemsetAsync(s.scratch, 0, sizeof(gpu::ProxyScratch), s.stream));
  }
  KVLANE_CUDA(cudaMalloc(reinterpret_cast<void**>(&chain_), sizeof(*chain_)));
  KVLANE_CUDA(cudaMemsetAsync(chain_, 0, sizeof(*chain_), slots_[0].stream));
  for (Slot& s : slots_) KVLANE_CUDA(cudaStreamSynchronize(s.stream));
  KVLANE_CUDA(cudaHostAlloc(reinterpret_cast<void**>(&ctl_), sizeof(gpu::ProxyCtl),
                            cudaHostAllocMapped | cudaHostAllocPortable));
  std::memset(ctl_, 0, sizeof(gpu::ProxyCtl));
  KVLANE_CUDA(cudaHostAlloc(reinterpret_cast<void**>(&ring_), gpu::kProxyRing * sizeof(gpu::ProxyEntry),
                            cudaHostAllocMapped | cudaHostAllocPortable));
  std::memset(ring_, 0, gpu::kProxyRing * sizeof(gpu::ProxyEntry));
  KVLANE_CUDA(cudaHostAlloc(reinterpret_cast<void**>(&lists_),
                            gpu::kProxyRing * gpu::kProxyMaxSegs * sizeof(gpu::CopySeg),
                            cudaHostAllocMapped | cudaHostAllocPortable));
  void* mapped = nullptr;  // the same address under UVA; asked once, not per entry
  KVLANE_CUDA(cudaHostGetDevicePointer(&mapped, lists_, 0));
  lists_dev_ = reinterpret_cast<uint64_t>(mapped);
  return Status::Ok();
}

// Fields first, `ready` last: x86 keeps the stores in order, and the proxy
// reads the line with one PCIe read (a torn read fails `check`).
void CudaProxy::Write(const gpu::ProxyEntry& e) {
  gpu::ProxyEntry& slot = ring_[next_ % gpu::kProxyRing];
  gpu::ProxyEntry full = e;
  full.ready = next_ + 1;
  full.check = gpu::ProxyCheck(full);
  std::memcpy(reinterpret_cast<char*>(&slot) + 8, reinterpret_cast<const char*>(&full) + 8, sizeof(full) - 8);
  // Release pairs with the proxy's read of `ready` (the fields are visible first).
  std::atomic_ref<uint64_t>(slot.ready).store(full.ready, std::memory_order_release);
  ++next_;
}

Status CudaProxy::Queue(const gpu::CopySeg* host, uint32_t sb, uint32_t se, uint64_t value,
                        uint32_t record, uint32_t gen, bool dst_on_device) {
  gpu::ProxyEntry e{};
  e.op = static_cast<uint16_t>(dst_on_device ? gpu::kProxyCopyLocal : gpu::kProxyCopy);
  e.nsegs = static_cast<uint16_t>(se - sb);
  e.record = record;
  e.gen = gen;
  if (se - sb == 1) {
    e.seg = host[sb];
  } else {
    const uint64_t at = (next_ % gpu::kProxyRing) * gpu::kProxyMaxSegs;
    std::memcpy(lists_ + at, host + sb, (se - sb) * sizeof(gpu::CopySeg));
    e.segs = lists_dev_ + at * sizeof(gpu::CopySeg);
  }
  e.value = value;
  Write(e);
  uses_.store(uses_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);  // one writer
  return Status::Ok();
}

void CudaProxy::MirrorLatch() {
  if (ctl_ == nullptr) return;
  std::atomic_ref<uint32_t> w(ctl_->cpu_latched);
  if (w.load(std::memory_order_relaxed) == 0) w.store(1, std::memory_order_seq_cst);
}

uint32_t CudaProxy::gpu_error() const {
  return ctl_ ? std::atomic_ref<uint32_t>(ctl_->gpu_error).load(std::memory_order_acquire) : 0;
}

bool CudaProxy::saw_latch() const {
  return ctl_ && std::atomic_ref<uint32_t>(ctl_->saw_latch).load(std::memory_order_acquire) != 0;
}

void CudaProxy::InjectFault() {
  if (ctl_) std::atomic_ref<uint32_t>(ctl_->inject_fault).store(1, std::memory_order_seq_cst);
}

}  // namespace kvlane::core
