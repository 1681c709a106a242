// CudaProxy's lifetime: start, renewal with a hand-over between two slots,
// exit. See cuda_proxy.h.
#include <thread>

#include "gpu/copy_launch.h"
#include "transport/cuda/cuda_check.h"
#include "transport/cuda/cuda_proxy.h"

namespace kvlane::core {

// Each copy entry served in a slot added `blocks_` arrivals to its scratch (the
// kernel counts arrivals only when it runs more than one block).
Status CudaProxy::Launch(int s, bool handover) {
  Slot& slot = slots_[s];
  const unsigned long long base = blocks_ > 1 ? slot.served * static_cast<uint64_t>(blocks_) : 0;
  std::atomic_ref<uint32_t>(ctl_->alive[s]).store(0, std::memory_order_relaxed);
  std::atomic_ref<uint64_t>(ctl_->start[s]).store(0, std::memory_order_release);
  // A successor learns its first entry from ctl->start: next_ is the posters' (no lock here).
  const uint64_t first = handover ? 0 : next_;
  KVLANE_CUDA(gpu::LaunchProxy({ring_, ctl_, done_, slot.scratch, first, base, s, handover ? 1 : 0},
                               blocks_, slot.stream));
  return Status::Ok();
}

void CudaProxy::Retire(int s) {
  slots_[s].served += uses() - uses_at_start_;
  uses_at_start_ = uses();
}

// The current kernel returns after the entries written so far.
void CudaProxy::ExitCurrent() {
  gpu::ProxyEntry e{};
  e.op = gpu::kProxyExit;
  Write(e);
  Retire(cur_);
}

// The exit entry for the running kernel, then the successor's first entry.
void CudaProxy::HandOver() {
  ExitCurrent();
  cur_ = 1 - cur_;
  pending_ = false;
  std::atomic_ref<uint64_t>(ctl_->start[cur_]).store(next_ + 1, std::memory_order_release);
  ScheduleRenewal();
}

void CudaProxy::ScheduleRenewal() {
  if (renew_every_.count() == 0) {  // renewal off
    renew_at_.store(INT64_MAX, std::memory_order_relaxed);
    return;
  }
  RenewIn(renew_every_);
}

void CudaProxy::RenewIn(std::chrono::steady_clock::duration d) {
  renew_at_.store((std::chrono::steady_clock::now() + d).time_since_epoch().count(), std::memory_order_relaxed);
}

Status CudaProxy::Submit(const gpu::CopySeg* host, uint32_t sb, uint32_t se, uint64_t value,
                         std::chrono::milliseconds timeout) {
  if (!running()) {
    // The previous launches must have returned before the next one reuses the ring.
    KVLANE_RETURN_IF_ERROR(WaitExited(0, timeout));
    KVLANE_RETURN_IF_ERROR(WaitExited(1, timeout));
    KVLANE_RETURN_IF_ERROR(Launch(cur_, /*handover=*/false));
    uses_at_start_ = uses();
    ScheduleRenewal();
    running_.store(true, std::memory_order_relaxed);
  }
  return Queue(host, sb, se, value);
}

Status CudaProxy::LaunchSuccessor() {
  if (!running() || pending_) return Status::Ok();
  const int spare = 1 - cur_;
  if (cudaStreamQuery(slots_[spare].stream) == cudaErrorNotReady) return Status::Ok();  // still exiting
  KVLANE_RETURN_IF_ERROR(Launch(spare, /*handover=*/true));
  pending_ = true;
  RenewIn(std::chrono::steady_clock::duration::zero());  // look for `alive` at every idle moment
  return Status::Ok();
}

bool CudaProxy::successor_alive() const {
  return pending_ && std::atomic_ref<uint32_t>(ctl_->alive[1 - cur_]).load(std::memory_order_acquire) != 0;
}

void CudaProxy::Quiesce() {
  if (!running()) return;
  if (pending_) HandOver();  // the successor takes over only to exit at once
  ExitCurrent();
  renew_at_.store(INT64_MAX, std::memory_order_relaxed);
  running_.store(false, std::memory_order_relaxed);
}

bool CudaProxy::Exited() const {
  if (running()) return false;
  for (const Slot& s : slots_)
    if (cudaStreamQuery(s.stream) != cudaSuccess) return false;  // an error is left for Submit
  return true;
}

Status CudaProxy::WaitExited(int s, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    cudaError_t e = cudaStreamQuery(slots_[s].stream);
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
  KVLANE_RETURN_IF_ERROR(WaitExited(0, timeout));
  return WaitExited(1, timeout);
}

}  // namespace kvlane::core
