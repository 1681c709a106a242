#include "transport/cuda/cuda_copier.h"

#include <atomic>
#include <vector>

#include "transport/cuda/cuda_check.h"

namespace kvlane::core {
namespace {

// The device `ptr` lives on (pinned host memory: the current device), or an
// error for memory no copy engine reaches.
Result<int> DeviceOf(const void* ptr) {
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, ptr) != cudaSuccess) (void)cudaGetLastError();
  if (a.type == cudaMemoryTypeDevice || (a.type == cudaMemoryTypeManaged && a.device >= 0))
    return a.device;
  if (a.type == cudaMemoryTypeHost || a.type == cudaMemoryTypeManaged) {
    int d = 0;
    return cudaGetDevice(&d) == cudaSuccess ? d : 0;
  }
  return Status::InvalidArgument(
      "memory registered as kCuda is neither device nor pinned host memory");
}

// Not thread-safe (DeviceCopier): one thread queues and waits.
class CudaCopier final : public DeviceCopier {
 public:
  CudaCopier(uint8_t* buf, size_t cap, std::atomic<int>& alive)
      : buf_(buf), cap_(cap), alive_(alive) {}
  ~CudaCopier() override {
    for (PerDevice& d : devices_) {
      DeviceGuard on(d.device);
      for (cudaStream_t s : d.streams)
        if (s != nullptr) (void)cudaStreamSynchronize(s), (void)cudaStreamDestroy(s);
    }
    (void)cudaFreeHost(buf_);
    (void)cudaGetLastError();
    alive_.fetch_sub(1, std::memory_order_relaxed);
  }

  size_t capacity() const override { return cap_; }
  uint8_t* half(int h) override { return buf_ + h * cap_; }
  Status ToHost(int h, size_t at, const void* src, size_t len) override {
    return Queue(h, half(h) + at, src, len, src);
  }
  Status ToDevice(int h, size_t at, void* dst, size_t len) override {
    return Queue(h, dst, half(h) + at, len, dst);
  }
  Status Wait(int h) override {
    Status first;
    for (PerDevice& d : devices_) {
      if (!d.used[h]) continue;
      d.used[h] = false;
      DeviceGuard on(d.device);
      const cudaError_t err = cudaStreamSynchronize(d.streams[h]);
      if (err != cudaSuccess && first.ok()) {
        (void)cudaGetLastError();
        first = CudaStatus(err, "staging copy (cudaStreamSynchronize)", __FILE__, __LINE__);
      }
    }
    return first;
  }

 private:
  struct PerDevice {
    int device = 0;
    cudaStream_t streams[kHalves] = {};
    bool used[kHalves] = {};
  };

  // The device of `ptr`: one lookup per allocation, not per range (a window
  // holds many ranges of one allocation).
  Result<int> Device(const void* ptr) {
    const auto p = reinterpret_cast<unsigned long long>(ptr);
    if (p >= last_base_ && p - last_base_ < last_len_) return last_device_;
    KVLANE_ASSIGN_OR_RETURN(int device, DeviceOf(ptr));
    unsigned long long base = 0;
    size_t len = 0;
    if (Driver().address_range != nullptr && Driver().address_range(&base, &len, p) == 0)
      last_base_ = base, last_len_ = len, last_device_ = device;
    return device;
  }

  // The streams of the device holding `ptr`, made at its first copy there.
  // The pointer is into devices_: good until the next call.
  Result<PerDevice*> On(const void* ptr) {
    KVLANE_ASSIGN_OR_RETURN(int device, Device(ptr));
    for (PerDevice& d : devices_)
      if (d.device == device) return &d;
    PerDevice d;
    d.device = device;
    DeviceGuard on(device);  // streams belong to the current device
    for (cudaStream_t& s : d.streams) {
      const cudaError_t err = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
      if (err != cudaSuccess) {
        for (cudaStream_t made : d.streams)
          if (made != nullptr) (void)cudaStreamDestroy(made);
        (void)cudaGetLastError();
        return CudaStatus(err, "cudaStreamCreateWithFlags", __FILE__, __LINE__);
      }
    }
    devices_.push_back(d);
    return &devices_.back();
  }

  Status Queue(int h, void* dst, const void* src, size_t len, const void* device_side) {
    KVLANE_ASSIGN_OR_RETURN(PerDevice * d, On(device_side));
    DeviceGuard on(d->device);
    d->used[h] = true;  // Wait syncs the stream even when this copy was refused
    const cudaError_t err = cudaMemcpyAsync(dst, src, len, cudaMemcpyDefault, d->streams[h]);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      return CudaStatus(err, "cudaMemcpyAsync (staging)", __FILE__, __LINE__);
    }
    return Status::Ok();
  }

  uint8_t* const buf_;
  const size_t cap_;
  std::atomic<int>& alive_;
  std::vector<PerDevice> devices_;
  unsigned long long last_base_ = 0, last_len_ = 0;
  int last_device_ = 0;
};

class CudaStaging final : public DeviceStaging {
 public:
  Result<std::unique_ptr<DeviceCopier>> MakeCopier(const void* first) override {
    KVLANE_ASSIGN_OR_RETURN(int device, DeviceOf(first));
    // The staging thread's device from now on (not restored: it is ours), so
    // that the pinned halves and the streams do not make a context on GPU 0.
    KVLANE_CUDA(cudaSetDevice(device));
    if (alive_.fetch_add(1, std::memory_order_relaxed) >= kMaxStagingCopiers) {
      alive_.fetch_sub(1, std::memory_order_relaxed);
      return Status::NotAllowed("tcp: " + std::to_string(kMaxStagingCopiers) +
                                " staging buffers are in use (2 MiB pinned each)");
    }
    void* p = nullptr;
    // Portable: pinned for every device, whichever holds the memory staged.
    const cudaError_t err = cudaHostAlloc(&p, 2 * kStagingHalfBytes, cudaHostAllocPortable);
    if (err != cudaSuccess) {
      alive_.fetch_sub(1, std::memory_order_relaxed);
      (void)cudaGetLastError();
      return CudaStatus(err, "cudaHostAlloc (staging)", __FILE__, __LINE__);
    }
    return std::unique_ptr<DeviceCopier>(
        new CudaCopier(static_cast<uint8_t*>(p), kStagingHalfBytes, alive_));
  }

 private:
  std::atomic<int> alive_{0};
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
