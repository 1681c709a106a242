#include "transport/cuda/cuda_copier.h"

#include <algorithm>
#include <deque>
#include <memory>

#include "transport/cuda/cuda_check.h"
#include "transport/cuda/staging_batch.h"
#include "transport/cuda/staging_kernel.h"

namespace kvlane::core {
namespace {

// Where memory registered as kCuda lives.
struct Where {
  int device = 0;
  bool on_device = false;  // device memory (a kernel reaches it), not pinned host
};

// The device `ptr` lives on (pinned host memory: the current device), or an
// error for memory no copy engine reaches.
Result<Where> WhereIs(const void* ptr) {
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, ptr) != cudaSuccess) (void)cudaGetLastError();
  if (a.type == cudaMemoryTypeDevice) return Where{a.device, true};
  if (a.type == cudaMemoryTypeManaged && a.device >= 0) return Where{a.device, false};
  if (a.type == cudaMemoryTypeHost || a.type == cudaMemoryTypeManaged) {
    int d = 0;
    return Where{cudaGetDevice(&d) == cudaSuccess ? d : 0, false};
  }
  return Status::InvalidArgument(
      "memory registered as kCuda is neither device nor pinned host memory");
}

// Not thread-safe (DeviceCopier): one thread queues and waits.
class CudaCopier final : public DeviceCopier {
 public:
  CudaCopier(uint8_t* buf, size_t cap, StagingCopy how) : buf_(buf), cap_(cap), how_(how) {}
  ~CudaCopier() override {
    for (PerDevice& d : devices_) {
      DeviceGuard on(d.device);
      for (cudaStream_t s : d.streams)
        if (s != nullptr) (void)cudaStreamSynchronize(s);
      d.kernel.reset();  // frees on the streams: before they go
      d.ce.reset();
      for (cudaStream_t s : d.streams)
        if (s != nullptr) (void)cudaStreamDestroy(s);
    }
    (void)cudaFreeHost(buf_);
    (void)cudaGetLastError();
  }

  size_t capacity() const override { return cap_; }
  uint8_t* half(int h) override { return buf_ + h * cap_; }
  Status ToHost(int h, size_t at, const void* src, size_t len) override {
    return Queue(h, half(h) + at, src, len, src, /*to_host=*/true);
  }
  Status ToDevice(int h, size_t at, void* dst, size_t len) override {
    return Queue(h, dst, half(h) + at, len, dst, /*to_host=*/false);
  }
  Status Flush(int h) override {
    Status first;
    for (PerDevice& d : devices_) {
      DeviceGuard on(d.device);
      Status s = d.kernel ? d.kernel->Launch(h, d.streams[h])
                 : d.ce   ? d.ce->Issue(h, d.streams[h])
                          : Status::Ok();
      if (!s.ok() && d.error[h].ok()) d.error[h] = s;
      if (first.ok()) first = std::move(s);
    }
    return first;
  }
  Status Wait(int h) override {
    Status first = Flush(h);
    for (PerDevice& d : devices_) {
      if (!d.used[h]) continue;
      d.used[h] = false;
      DeviceGuard on(d.device);
      const cudaError_t err = cudaStreamSynchronize(d.streams[h]);
      if (err != cudaSuccess && first.ok()) {
        (void)cudaGetLastError();
        first = CudaStatus(err, "staging copy (cudaStreamSynchronize)", __FILE__, __LINE__);
      }
      // The held or queued copies are done (or were dropped, with an error).
      Status held = d.kernel ? d.kernel->Reset(h) : Status::Ok();
      if (d.ce) d.ce->Reset(h);
      if (first.ok()) first = !d.error[h].ok() ? d.error[h] : held;
      d.error[h] = Status::Ok();
    }
    return first;
  }

 private:
  struct PerDevice {
    int device = 0;
    cudaStream_t streams[kHalves] = {};
    bool used[kHalves] = {};
    Status error[kHalves];  // a Flush that failed: Wait returns it
    // Copies held back per window (made at the device's first device range):
    // kKernel's short ranges, or kBatch's batched ones.
    std::unique_ptr<KernelBatch> kernel;
    std::unique_ptr<CeBatch> ce;
  };

  // Where `ptr` lives: one lookup per allocation, not per range (a window
  // holds many ranges of one allocation).
  Result<Where> Locate(const void* ptr) {
    const auto p = reinterpret_cast<unsigned long long>(ptr);
    if (p >= last_base_ && p - last_base_ < last_len_) return last_;
    KVLANE_ASSIGN_OR_RETURN(Where w, WhereIs(ptr));
    unsigned long long base = 0;
    size_t len = 0;
    if (Driver().address_range != nullptr && Driver().address_range(&base, &len, p) == 0)
      last_base_ = base, last_len_ = len, last_ = w;
    return w;
  }

  // The streams of `device`, made at its first copy there. The pointer is
  // into devices_ (a deque: stable).
  Result<PerDevice*> On(int device) {
    for (PerDevice& d : devices_)
      if (d.device == device) return &d;
    PerDevice d;
    d.device = device;
    DeviceGuard on(device);  // streams belong to the current device
    // The highest priority: a batch kernel's blocks go first as the
    // application's kernels free SMs (a window never waits for a whole kernel).
    int lo = 0, hi = 0;
    if (cudaDeviceGetStreamPriorityRange(&lo, &hi) != cudaSuccess) (void)cudaGetLastError(), hi = 0;
    for (cudaStream_t& s : d.streams) {
      const cudaError_t err = cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, hi);
      if (err != cudaSuccess) {
        for (cudaStream_t made : d.streams)
          if (made != nullptr) (void)cudaStreamDestroy(made);
        (void)cudaGetLastError();
        return CudaStatus(err, "cudaStreamCreateWithPriority", __FILE__, __LINE__);
      }
    }
    devices_.push_back(std::move(d));
    return &devices_.back();
  }

  Status Queue(int h, void* dst, const void* src, size_t len, const void* device_side,
               bool to_host) {
    KVLANE_ASSIGN_OR_RETURN(Where w, Locate(device_side));
    KVLANE_ASSIGN_OR_RETURN(PerDevice * d, On(w.device));
    DeviceGuard on(d->device);
    d->used[h] = true;  // Wait syncs the stream even when this copy was refused
    const gpu::CopySeg seg{reinterpret_cast<uint64_t>(src), reinterpret_cast<uint64_t>(dst), len};
    // Only device memory is held back: pinned host memory registered as kCuda
    // need not be mapped at the same address on the device.
    if (w.on_device && how_ == StagingCopy::kKernel && len < KernelBatch::kBelow) {
      if (!d->kernel) d->kernel = std::make_unique<KernelBatch>();
      return d->kernel->Hold(h, seg, to_host, d->streams[h]);
    }
    if (w.on_device && how_ == StagingCopy::kBatch && (to_host || len >= CeBatch::kInlineBelow)) {
      if (!d->ce) d->ce = std::make_unique<CeBatch>();
      d->ce->Add(h, seg);
      return Status::Ok();
    }
    const cudaError_t err = cudaMemcpyAsync(dst, src, len, cudaMemcpyDefault, d->streams[h]);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      return CudaStatus(err, "cudaMemcpyAsync (staging)", __FILE__, __LINE__);
    }
    return Status::Ok();
  }

  uint8_t* const buf_;
  const size_t cap_;
  const StagingCopy how_;
  std::deque<PerDevice> devices_;
  unsigned long long last_base_ = 0, last_len_ = 0;
  Where last_;
};

class CudaStaging final : public DeviceStaging {
 public:
  Result<std::unique_ptr<DeviceCopier>> MakeCopier(const void* first, StagingCopy how) override {
    KVLANE_ASSIGN_OR_RETURN(Where w, WhereIs(first));
    const int device = w.device;
    // The staging thread's device from now on (not restored: it is ours), so
    // that the pinned halves and the streams do not make a context on GPU 0.
    KVLANE_CUDA(cudaSetDevice(device));
    void* p = nullptr;
    // Portable: pinned for every device, whichever holds the memory staged.
    const cudaError_t err = cudaHostAlloc(&p, 2 * kStagingHalfBytes, cudaHostAllocPortable);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      return CudaStatus(err, "cudaHostAlloc (staging)", __FILE__, __LINE__);
    }
    return std::unique_ptr<DeviceCopier>(
        new CudaCopier(static_cast<uint8_t*>(p), kStagingHalfBytes, how));
  }
};

}  // namespace

std::unique_ptr<DeviceStaging> MakeCudaStaging() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    (void)cudaGetLastError();
    return nullptr;
  }
  return std::make_unique<CudaStaging>();
}

}  // namespace kvlane::core
