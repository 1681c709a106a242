// CudaProxy's lifetime: a chain of launches handing the ring to each other on
// the GPU, tended by the lane's issue thread. See cuda_proxy.h.
#include <thread>

#include "gpu/copy_launch.h"
#include "transport/cuda/cuda_check.h"
#include "transport/cuda/cuda_proxy.h"

namespace kvlane::core {

// The low 16 bits of the generation that stopped last (relaxed: the record
// orders nothing, see gpu::ProxyCtl::handoff).
uint32_t CudaProxy::handoff_gen16() const {
  return gpu::TaggedGen16(std::atomic_ref<uint64_t>(ctl_->handoff).load(std::memory_order_relaxed));
}

// Generation g runs on stream g % 2, after generation g - 2 returned there.
Status CudaProxy::Launch(uint64_t gen, const uint64_t* start) {
  Slot& slot = slots_[gen % kSlots];
  KVLANE_CUDA(gpu::LaunchProxy(
      {ring_, ctl_, done_, slot.scratch, gen, max_life_ns_, records_, record_slots_, chain_,
       start != nullptr ? *start : 0, start != nullptr ? 1u : 0u},
      blocks_, slot.stream));
  gen_.store(gen, std::memory_order_relaxed);
  return Status::Ok();
}

Status CudaProxy::Submit(const gpu::CopySeg* host, uint32_t sb, uint32_t se, uint64_t value,
                         uint32_t record, uint32_t gen, bool dst_on_device,
                         std::chrono::milliseconds timeout) {
  if (!running()) {
    // The previous chain must have returned before a new one reads the ring.
    KVLANE_RETURN_IF_ERROR(WaitExited(0, timeout));
    KVLANE_RETURN_IF_ERROR(WaitExited(1, timeout));
    // The new chain's first launch starts from a record the host writes as if
    // the last launch had stopped here (no kernel runs that could write it).
    // (Also given to the launch itself: it does not poll for it.)
    const uint64_t last = gen_.load(std::memory_order_relaxed);
    const uint64_t start = gpu::PackTagged(last, next_, false);
    std::atomic_ref<uint64_t>(ctl_->handoff).store(start, std::memory_order_release);
    KVLANE_RETURN_IF_ERROR(Launch(last + 1, &start));
    serving_noted_ = 0;  // Tend notes generation last + 1 serving and sets the renewal
    // Release: Tend (the issue thread) reads gen_ and serving_noted_ after it.
    running_.store(true, std::memory_order_release);
  }
  return Queue(host, sb, se, value, record, gen, dst_on_device);
}

Status CudaProxy::Tend() {
  if (!running_.load(std::memory_order_acquire)) return Status::Ok();  // pairs with Submit
  const uint64_t gen = gen_.load(std::memory_order_relaxed);
  const uint32_t stopped = handoff_gen16();
  // Generation gen - 1 stopped: gen serves (or is about to). Generation gen
  // stopped: the chain stalled (the newest launch left on its own). Else a
  // successor waits for its predecessor's record.
  const bool stalled = stopped == (gen & 0xffff);
  if (!stalled && stopped != ((gen - 1) & 0xffff)) return Status::Ok();
  if (!stalled) {
    const auto now = std::chrono::steady_clock::now();
    if (serving_noted_ != gen) {  // generation gen took the ring over
      serving_noted_ = gen;
      renew_at_ = renew_every_.count() == 0 ? TimePoint::max() : now + renew_every_;
    }
    if (now < renew_at_) return Status::Ok();
  }
  // The successor's stream still runs generation gen - 1, which has handed over
  // and is returning: try again at the next idle moment.
  if (cudaStreamQuery(slots_[(gen + 1) % kSlots].stream) == cudaErrorNotReady) return Status::Ok();
  renew_at_ = TimePoint::max();
  return Launch(gen + 1);
}

void CudaProxy::Quiesce() {
  if (!running()) return;
  gpu::ProxyEntry e{};
  e.op = gpu::kProxyExit;
  Write(e);
  renew_at_ = TimePoint::max();
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
