#include "transport/cuda/cuda_proxy.h"

#include <atomic>
#include <cstring>
#include <thread>

#include "gpu/copy_launch.h"
#include "transport/cuda/cuda_check.h"

namespace kvlane::core {

void CudaProxy::Free() {
  if (wedged_) return;  // the kernel may still read these; freeing would also block
  if (stream_) (void)cudaStreamDestroy(stream_);
  if (scratch_) (void)cudaFree(scratch_);
  if (ring_) (void)cudaFreeHost(ring_);
  if (ctl_) (void)cudaFreeHost(ctl_);
  if (lists_) (void)cudaFreeHost(lists_);
  stream_ = nullptr, scratch_ = nullptr, ring_ = nullptr, ctl_ = nullptr, lists_ = nullptr;
  running_.store(false, std::memory_order_relaxed);
}

Status CudaProxy::Init(int blocks, uint64_t* done, int priority) {
  blocks_ = blocks;
  done_ = done;
  KVLANE_CUDA(cudaStreamCreateWithPriority(&stream_, cudaStreamNonBlocking, priority));
  KVLANE_CUDA(cudaMalloc(reinterpret_cast<void**>(&scratch_), sizeof(gpu::ProxyScratch)));
  KVLANE_CUDA(cudaMemset(scratch_, 0, sizeof(gpu::ProxyScratch)));  // once: see gpu::ProxyScratch
  KVLANE_CUDA(cudaHostAlloc(reinterpret_cast<void**>(&ctl_), sizeof(gpu::ProxyCtl),
                            cudaHostAllocMapped | cudaHostAllocPortable));
  std::memset(ctl_, 0, sizeof(gpu::ProxyCtl));
  KVLANE_CUDA(cudaHostAlloc(reinterpret_cast<void**>(&ring_), gpu::kProxyRing * sizeof(gpu::ProxyEntry),
                            cudaHostAllocMapped | cudaHostAllocPortable));
  std::memset(ring_, 0, gpu::kProxyRing * sizeof(gpu::ProxyEntry));
  KVLANE_CUDA(cudaHostAlloc(reinterpret_cast<void**>(&lists_),
                            gpu::kProxyRing * gpu::kProxyMaxSegs * sizeof(gpu::CopySeg),
                            cudaHostAllocMapped | cudaHostAllocPortable));
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

Status CudaProxy::Submit(const gpu::CopySeg* host, uint32_t sb, uint32_t se, uint64_t value,
                         std::chrono::milliseconds timeout) {
  if (!running()) KVLANE_RETURN_IF_ERROR(Start(timeout));
  gpu::ProxyEntry e{};
  e.op = gpu::kProxyCopy;
  e.seg_begin = 0;
  e.seg_end = se - sb;
  if (se - sb == 1) {
    e.seg = host[sb];
  } else {
    gpu::CopySeg* list = lists_ + (next_ % gpu::kProxyRing) * gpu::kProxyMaxSegs;
    std::memcpy(list, host + sb, (se - sb) * sizeof(gpu::CopySeg));
    void* mapped = nullptr;  // the same address under UVA; asked once per list to be exact
    KVLANE_CUDA(cudaHostGetDevicePointer(&mapped, list, 0));
    e.segs = reinterpret_cast<uint64_t>(mapped);
  }
  e.value = value;
  Write(e);
  uses_.store(uses_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);  // one writer
  return Status::Ok();
}

Status CudaProxy::Start(std::chrono::milliseconds timeout) {
  // The previous launch must have returned before the next one reuses the ring.
  KVLANE_RETURN_IF_ERROR(WaitExited(timeout));
  // Every copy entry of the earlier launches added `blocks_` arrivals (the
  // kernel counts arrivals only when it runs more than one block).
  const unsigned long long base = blocks_ > 1 ? uses() * static_cast<uint64_t>(blocks_) : 0;
  KVLANE_CUDA(gpu::LaunchProxy({ring_, ctl_, done_, scratch_, next_, base}, blocks_, stream_));
  launched_at_ = std::chrono::steady_clock::now();
  running_.store(true, std::memory_order_relaxed);
  return Status::Ok();
}

Status CudaProxy::Renew(std::chrono::milliseconds timeout) {
  Quiesce();
  return Start(timeout);
}

void CudaProxy::Quiesce() {
  if (!running()) return;
  gpu::ProxyEntry e{};
  e.op = gpu::kProxyExit;
  Write(e);
  running_.store(false, std::memory_order_relaxed);
}

bool CudaProxy::Exited() const {
  if (running()) return false;
  const cudaError_t e = cudaStreamQuery(stream_);
  return e == cudaSuccess;  // an error is left for Submit (WaitExited) to report
}

Status CudaProxy::WaitExited(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    cudaError_t e = cudaStreamQuery(stream_);
    if (e == cudaSuccess) return Status::Ok();
    if (e != cudaErrorNotReady) return CudaStatus(e, "cuda proxy kernel", __FILE__, __LINE__);
    if (std::chrono::steady_clock::now() > deadline) {
      wedged_ = true;
      return Status::Timeout("cuda proxy kernel did not exit within io_timeout (GPU wedged?); "
                             "its ring is leaked");
    }
    std::this_thread::yield();
  }
}

Status CudaProxy::Shutdown(std::chrono::milliseconds timeout) {
  if (!enabled()) return Status::Ok();
  MirrorLatch();  // copy nothing more; entries still queued are acknowledged as skipped
  Quiesce();
  return WaitExited(timeout);
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
