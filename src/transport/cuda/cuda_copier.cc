#include "transport/cuda/cuda_copier.h"

#include <vector>

#include "transport/cuda/cuda_check.h"

namespace kvlane::core {
namespace {

// Not thread-safe (DeviceCopier): one thread queues and waits.
class CudaCopier final : public DeviceCopier {
 public:
  static Result<std::unique_ptr<DeviceCopier>> Make(size_t cap) {
    void* p = nullptr;
    // Portable: pinned for every device, whichever holds the memory staged.
    KVLANE_CUDA(cudaHostAlloc(&p, 2 * cap, cudaHostAllocPortable));
    return std::unique_ptr<DeviceCopier>(new CudaCopier(static_cast<uint8_t*>(p), cap));
  }
  ~CudaCopier() override {
    for (PerDevice& d : devices_) {
      DeviceGuard on(d.device);
      for (cudaStream_t s : d.streams)
        if (s != nullptr) (void)cudaStreamSynchronize(s), (void)cudaStreamDestroy(s);
    }
    (void)cudaFreeHost(buf_);
    (void)cudaGetLastError();
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
      if (err != cudaSuccess && first.ok())
        first = CudaStatus(err, "staging copy (cudaStreamSynchronize)", __FILE__, __LINE__);
    }
    return first;
  }

 private:
  struct PerDevice {
    int device = 0;
    cudaStream_t streams[kHalves] = {};
    bool used[kHalves] = {};
  };

  CudaCopier(uint8_t* buf, size_t cap) : buf_(buf), cap_(cap) {}

  // The streams of the device holding `ptr`, made at its first copy there.
  Result<PerDevice*> On(const void* ptr) {
    cudaPointerAttributes a{};
    if (cudaPointerGetAttributes(&a, ptr) != cudaSuccess) (void)cudaGetLastError();
    if (a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged &&
        a.type != cudaMemoryTypeHost)
      return Status::InvalidArgument(
          "memory registered as kCuda is neither device nor pinned host memory");
    const int device = a.type == cudaMemoryTypeHost || a.device < 0 ? 0 : a.device;
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
        return CudaStatus(err, "cudaStreamCreateWithFlags", __FILE__, __LINE__);
      }
    }
    devices_.push_back(d);
    return &devices_.back();
  }

  Status Queue(int h, void* dst, const void* src, size_t len, const void* device_side) {
    KVLANE_ASSIGN_OR_RETURN(PerDevice * d, On(device_side));
    DeviceGuard on(d->device);
    d->used[h] = true;
    KVLANE_CUDA(cudaMemcpyAsync(dst, src, len, cudaMemcpyDefault, d->streams[h]));
    return Status::Ok();
  }

  uint8_t* const buf_;
  const size_t cap_;
  std::vector<PerDevice> devices_;  // pointers into it live only within one call
};

class CudaStaging final : public DeviceStaging {
 public:
  Result<std::unique_ptr<DeviceCopier>> MakeCopier() override {
    return CudaCopier::Make(kStagingHalfBytes);
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
