#include "transport/cuda/cuda_copier.h"

#include <algorithm>
#include <atomic>
#include <vector>

#include "gpu/copy_launch.h"
#include "transport/cuda/cuda_check.h"

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

// Ranges of device memory shorter than this are batched: one copy kernel per
// half and window moves them all (the copy engine costs ~2-3 us of CPU per
// cudaMemcpyAsync, which at 22.5 KB pages held device pools to 0.83-0.87 of
// host pools, session 11). Longer ones go to the copy engine, which needs no SMs.
constexpr size_t kBatchBelow = 64u << 10;
// Ranges one batch holds: a window with more (ranges under 256 B on average)
// launches, waits and starts over.
constexpr uint32_t kBatchSegs = 4096;
constexpr uint64_t kBatchUnit = 16u << 10;  // a block per 16 KiB of a range
constexpr int kBatchMaxBlocks = 1024;

// Not thread-safe (DeviceCopier): one thread queues and waits.
class CudaCopier final : public DeviceCopier {
 public:
  CudaCopier(uint8_t* buf, size_t cap, std::atomic<int>& alive)
      : buf_(buf), cap_(cap), alive_(alive) {}
  ~CudaCopier() override {
    for (PerDevice& d : devices_) {
      DeviceGuard on(d.device);
      for (cudaStream_t s : d.streams)
        if (s != nullptr) (void)cudaStreamSynchronize(s);
      if (d.blocks_finished != nullptr) (void)cudaFreeAsync(d.blocks_finished, d.streams[0]);
      for (cudaStream_t s : d.streams)
        if (s != nullptr) (void)cudaStreamDestroy(s);
      if (d.segs != nullptr) (void)cudaFreeHost(d.segs);
    }
    (void)cudaFreeHost(buf_);
    (void)cudaGetLastError();
    alive_.fetch_sub(1, std::memory_order_relaxed);
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
      Status s = Launch(d, h);
      if (first.ok()) first = std::move(s);
    }
    return first;
  }
  Status Wait(int h) override {
    Status first = Flush(h);
    for (PerDevice& d : devices_) {
      if (!d.used[h]) continue;
      d.used[h] = false;
      Batch& b = d.batch[h];
      if (!b.error.ok() && first.ok()) first = b.error;
      b = Batch{};  // the kernels that read the batch finished below
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
  // Short ranges of one half and device held back for one kernel launch:
  // segs[0, n) queued since the half's last Wait, [launched, n) not started.
  struct Batch {
    uint32_t n = 0, launched = 0;
    uint64_t max_len = 0;  // of the ranges not started
    bool to_host = false;  // some range not started lands in pinned host memory
    Status error;          // a launch that failed: its ranges were dropped
  };
  struct PerDevice {
    int device = 0;
    cudaStream_t streams[kHalves] = {};
    bool used[kHalves] = {};
    Batch batch[kHalves];
    // Made at the first short range: pinned host, kBatchSegs CopySegs per half
    // (read by the kernels) and a completion word per half; device memory, the
    // kernel's block counter per half.
    gpu::CopySeg* segs = nullptr;
    unsigned* blocks_finished = nullptr;
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
  // into devices_: good until the next call.
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
    devices_.push_back(d);
    return &devices_.back();
  }

  // The batch tables of `d`. REQUIRES: d's device is current. The counters
  // come from the stream-ordered allocator: cudaFree would wait for the whole
  // device (a resident proxy's launch included), cudaFreeAsync does not.
  Status MakeTables(PerDevice& d) {
    if (d.segs != nullptr) return Status::Ok();
    void* segs = nullptr;
    KVLANE_CUDA(cudaHostAlloc(&segs, sizeof(gpu::CopySeg) * kBatchSegs * kHalves + 8 * kHalves,
                              cudaHostAllocPortable | cudaHostAllocMapped));
    void* counters = nullptr;
    const size_t n = sizeof(unsigned) * kHalves;
    cudaError_t err = cudaMallocAsync(&counters, n, d.streams[0]);
    if (err == cudaSuccess) err = cudaMemsetAsync(counters, 0, n, d.streams[0]);
    if (err == cudaSuccess) err = cudaStreamSynchronize(d.streams[0]);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      if (counters != nullptr) (void)cudaFreeAsync(counters, d.streams[0]);
      (void)cudaFreeHost(segs);
      return CudaStatus(err, "staging batch tables", __FILE__, __LINE__);
    }
    d.segs = static_cast<gpu::CopySeg*>(segs);
    d.blocks_finished = static_cast<unsigned*>(counters);
    return Status::Ok();
  }

  // Starts d's held ranges of half h with one kernel.
  Status Launch(PerDevice& d, int h) {
    Batch& b = d.batch[h];
    if (b.launched == b.n) return Status::Ok();
    const uint32_t begin = b.launched;
    b.launched = b.n;
    const auto parts =
        static_cast<uint32_t>(std::max<uint64_t>(1, (b.max_len + kBatchUnit - 1) / kBatchUnit));
    const int blocks =
        static_cast<int>(std::min<uint64_t>(uint64_t{b.n - begin} * parts, kBatchMaxBlocks));
    auto* words = reinterpret_cast<uint64_t*>(d.segs + kBatchSegs * kHalves);
    const gpu::CopyDone done{d.blocks_finished + h, words + h, 1, nullptr, 0};
    DeviceGuard on(d.device);
    // A batch landing in device memory only: the device-scope fence suffices
    // (copy_launch.h); Wait's stream synchronization orders it for the host.
    const cudaError_t err = gpu::LaunchCopySegments(
        d.segs + kBatchSegs * h, begin, b.n, parts, blocks, done,
        b.to_host ? gpu::BlockFence::kSystem : gpu::BlockFence::kDevice, d.streams[h]);
    b.max_len = 0;
    b.to_host = false;
    if (err == cudaSuccess) return Status::Ok();
    (void)cudaGetLastError();
    Status s = CudaStatus(err, "staging copy kernel", __FILE__, __LINE__);
    if (b.error.ok()) b.error = s;
    return s;
  }

  // Holds a short range of device memory for the half's next launch.
  Status Hold(PerDevice& d, int h, void* dst, const void* src, size_t len, bool to_host) {
    KVLANE_RETURN_IF_ERROR(MakeTables(d));
    Batch& b = d.batch[h];
    if (b.n == kBatchSegs) {  // full: start it, wait, and reuse the table
      KVLANE_RETURN_IF_ERROR(Launch(d, h));
      KVLANE_CUDA(cudaStreamSynchronize(d.streams[h]));
      b.n = b.launched = 0;
    }
    d.segs[kBatchSegs * h + b.n++] = {reinterpret_cast<uint64_t>(src),
                                      reinterpret_cast<uint64_t>(dst), len};
    b.max_len = std::max<uint64_t>(b.max_len, len);
    b.to_host = b.to_host || to_host;
    return Status::Ok();
  }

  Status Queue(int h, void* dst, const void* src, size_t len, const void* device_side,
               bool to_host) {
    KVLANE_ASSIGN_OR_RETURN(Where w, Locate(device_side));
    KVLANE_ASSIGN_OR_RETURN(PerDevice * d, On(w.device));
    DeviceGuard on(d->device);
    d->used[h] = true;  // Wait syncs the stream even when this copy was refused
    // Only device memory goes to the kernel: pinned host memory registered as
    // kCuda need not be mapped at the same address on the device.
    if (len < kBatchBelow && w.on_device) return Hold(*d, h, dst, src, len, to_host);
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
  Where last_;
};

class CudaStaging final : public DeviceStaging {
 public:
  Result<std::unique_ptr<DeviceCopier>> MakeCopier(const void* first) override {
    KVLANE_ASSIGN_OR_RETURN(Where w, WhereIs(first));
    const int device = w.device;
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
