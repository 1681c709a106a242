// The probes of --probes2 (declared in bench_probes.h).
#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "bench_common.h"
#include "bench_probes.h"
#include "gpu/copy_launch.h"

namespace kvlane::test {
namespace {

// Makes `dev` the calling thread's current device while it lives (a kernel
// launches only into a stream of the current device), then restores the old one.
class DeviceGuard {
 public:
  explicit DeviceGuard(int dev) : dev_(dev) {
    cudaGetDevice(&prev_);
    if (dev_ != prev_) cudaSetDevice(dev_);
  }
  ~DeviceGuard() {
    if (dev_ != prev_) cudaSetDevice(prev_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int dev_, prev_ = 0;
};

// Launches of the copy kernel on one GPU: a stream of its own, the segment
// table and the CopyDone counter in that GPU's memory, a done word in pinned
// host memory. Owns all of them; not thread-safe.
class KernelSide {
 public:
  // `high`: the stream gets the device's greatest priority (else the default).
  KernelSide(int dev, std::vector<gpu::CopySeg> segs, bool high = false)
      : dev_(dev), host_(std::move(segs)) {
    DeviceGuard g(dev_);
    int least = 0, greatest = 0;
    Note(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    Note(high ? cudaStreamCreateWithPriority(&stream_, cudaStreamNonBlocking, greatest)
              : cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    const size_t table = host_.size() * sizeof(gpu::CopySeg);
    Note(cudaMalloc(reinterpret_cast<void**>(&segs_), table));
    Note(cudaMalloc(reinterpret_cast<void**>(&fin_), sizeof(uint32_t)));
    Note(cudaHostAlloc(reinterpret_cast<void**>(&done_), 64,
                       cudaHostAllocMapped | cudaHostAllocPortable));
    if (err_ != cudaSuccess) return;
    *done_ = 0;
    Note(cudaMemset(fin_, 0, sizeof(uint32_t)));  // CopyDone: 0 between launches
    Note(cudaMemcpy(segs_, host_.data(), table, cudaMemcpyHostToDevice));
    Note(cudaDeviceSynchronize());  // the memset and the copy landed before any launch
    // As the engine: a device-scope fence per block when the copies land in dev's memory.
    cudaPointerAttributes a{};
    Note(host_.empty() ? cudaSuccess
                       : cudaPointerGetAttributes(&a, reinterpret_cast<void*>(host_[0].dst)));
    if (a.type == cudaMemoryTypeDevice && a.device == dev_) fence_ = gpu::BlockFence::kDevice;
  }
  ~KernelSide() {
    DeviceGuard g(dev_);
    if (stream_ != nullptr) {
      cudaStreamSynchronize(stream_);
      cudaStreamDestroy(stream_);
    }
    cudaFree(segs_);
    cudaFree(fin_);
    cudaFreeHost(done_);
  }
  KernelSide(const KernelSide&) = delete;
  KernelSide& operator=(const KernelSide&) = delete;

  cudaError_t status() const { return err_; }  // the first setup error
  const std::vector<gpu::CopySeg>& segs() const { return host_; }

  // The copy kernel over segs[begin, end), each cut into `parts`, `blocks`
  // blocks; its done value is one more than the previous launch's.
  cudaError_t Launch(uint32_t begin, uint32_t end, uint32_t parts, int blocks) {
    DeviceGuard g(dev_);
    const gpu::CopyDone done{fin_, done_, ++value_, nullptr, 0};
    return gpu::LaunchCopySegments(segs_, begin, end, parts, blocks, done, fence_, stream_);
  }
  cudaError_t Sync() { return cudaStreamSynchronize(stream_); }
  // Spins until the done word holds the last launch's value; false after 1 s.
  bool WaitDone() const {
    const auto t0 = Clock::now();
    for (uint32_t spin = 1; !Done(); ++spin)
      if (spin % 4096 == 0 && Clock::now() - t0 > std::chrono::seconds(1)) return false;
    return true;
  }
  bool Done() const {
    // Acquire: pairs with the last block's fence + store of `done` (StoreRecordAndDone).
    return std::atomic_ref<uint64_t>(*done_).load(std::memory_order_acquire) == value_;
  }

 private:
  void Note(cudaError_t e) {
    if (err_ == cudaSuccess) err_ = e;
  }

  int dev_;
  std::vector<gpu::CopySeg> host_;  // host copy of segs_
  cudaStream_t stream_ = nullptr;
  gpu::CopySeg* segs_ = nullptr;  // device memory of dev_
  uint32_t* fin_ = nullptr;       // device memory of dev_: CopyDone::blocks_finished
  uint64_t* done_ = nullptr;      // pinned host (mapped, portable): CopyDone::done
  uint64_t value_ = 0;            // the last launch's done value
  gpu::BlockFence fence_ = gpu::BlockFence::kSystem;  // kDevice: segs_ land in dev_'s memory
  cudaError_t err_ = cudaSuccess;
};

// The list of Scattered as segments from b.local (GPU 0) to b.ref_dst (GPU 1).
std::vector<gpu::CopySeg> ScatteredSegs(const Bench& b, uint64_t n, uint64_t d) {
  std::vector<uint32_t> ls, rs;
  ShuffledSlots(n, &ls, &rs);
  std::vector<gpu::CopySeg> segs(n);
  for (uint64_t i = 0; i < n; ++i)
    segs[i] = {reinterpret_cast<uint64_t>(b.local) + ls[i] * d,
               reinterpret_cast<uint64_t>(b.ref_dst) + rs[i] * d, d};
  return segs;
}

// The first segment whose destination bytes differ from its source; -1: none,
// -2: a copy to the host failed.
int64_t FirstBadSeg(const std::vector<gpu::CopySeg>& segs) {
  std::vector<uint8_t> hs, hd;
  for (size_t i = 0; i < segs.size(); ++i) {
    hs.resize(segs[i].len), hd.resize(segs[i].len);
    if (cudaMemcpy(hs.data(), reinterpret_cast<void*>(segs[i].src), segs[i].len,
                   cudaMemcpyDefault) != cudaSuccess ||
        cudaMemcpy(hd.data(), reinterpret_cast<void*>(segs[i].dst), segs[i].len,
                   cudaMemcpyDefault) != cudaSuccess)
      return -2;
    if (hs != hd) return static_cast<int64_t>(i);
  }
  return -1;
}

// GPU 0 pushes segments [0, split), GPU 1 pulls [split, n) (one block per
// segment each), launched back to back; returns when both finished.
cudaError_t PushPull(KernelSide& push, KernelSide& pull, uint32_t split, uint32_t n) {
  const cudaError_t lp =
      split > 0 ? push.Launch(0, split, 1, static_cast<int>(split)) : cudaSuccess;
  const cudaError_t ll =
      split < n ? pull.Launch(split, n, 1, static_cast<int>(n - split)) : cudaSuccess;
  const cudaError_t sp = push.Sync(), sl = pull.Sync();
  for (cudaError_t e : {lp, ll, sp, sl})
    if (e != cudaSuccess) return e;
  return cudaSuccess;
}

// `peer`'s memory becomes accessible from `dev` (already so: fine).
cudaError_t EnablePeer(int dev, int peer) {
  DeviceGuard g(dev);
  cudaError_t e = cudaDeviceEnablePeerAccess(peer, 0);
  if (e == cudaErrorPeerAccessAlreadyEnabled) e = cudaSuccess, (void)cudaGetLastError();
  return e;
}

// Every destination byte of a 50/50 push+pull, checked once on a sentinel;
// "PASS" or why not.
std::string VerifyPushPull(Bench& b, KernelSide& push, KernelSide& pull) {
  const auto& segs = push.segs();
  const uint32_t n = static_cast<uint32_t>(segs.size());
  {
    DeviceGuard g(b.peer_dev);
    cudaMemset(b.ref_dst, 0xab, 2 * n * segs[0].len);  // every slot ScatteredSegs uses
    cudaDeviceSynchronize();
  }
  const cudaError_t e = PushPull(push, pull, n / 2, n);
  const int64_t bad = e == cudaSuccess ? FirstBadSeg(segs) : -2;
  (void)cudaGetLastError();
  if (bad == -1) return "PASS";
  return bad == -2 ? "FAIL (CUDA error)" : "FAIL at desc " + std::to_string(bad);
}

// Host-observed microseconds from before a launch of s's copy kernel over its
// first segment (`grid` blocks, `grid` parts) to this thread seeing the done
// word: `warm` warm-ups, then `n` samples. Stops at a launch error or a
// timeout (cudaErrorTimeout), which lands in *err.
std::vector<double> KernelDoneTimes(Bench& b, KernelSide& s, int grid, int warm, int n,
                                    cudaError_t* err) {
  std::vector<double> t;
  *err = cudaSuccess;
  for (int i = 0; i < warm + n && *err == cudaSuccess; ++i) {
    const auto t0 = Clock::now();
    *err = s.Launch(0, 1, static_cast<uint32_t>(grid), grid);
    if (*err == cudaSuccess && !s.WaitDone()) *err = cudaErrorTimeout;
    if (i >= warm) t.push_back(b.Us(t0, Clock::now()));
  }
  return t;
}

// p50 and p99 rows of KernelDoneTimes beside the reference of the same bytes.
void KernelDoneRows(Bench& b, KernelSide& s, int grid, const char* label) {
  const uint64_t len = s.segs()[0].len;
  char name[96];
  std::snprintf(name, sizeof(name), "probe SM kernel %s grid=%d", label, grid);
  cudaError_t err = cudaSuccess;
  auto t = KernelDoneTimes(b, s, grid, 100, 500, &err);
  if (err != cudaSuccess) {
    std::printf("%s: %s\n", name, cudaGetErrorString(err));
    (void)cudaGetLastError();
    return;
  }
  auto ref = b.RefTimes(true, len, 100, 500);
  for (int p : {50, 99}) {
    std::snprintf(name, sizeof(name), "probe SM kernel %s grid=%d p%d us", label, grid, p);
    Row(name, Pct(t, p), Pct(ref, p), "us");
  }
}

}  // namespace

// Probe (not kvlane): the copy kernel over the list of Scattered, pushed by
// GPU 0 (NVLink stores), pulled by GPU 1 (NVLink loads), and split between
// both at once; GB/s over all bytes beside the reference (GPU 0 -> GPU 1).
// Returns the verification ("PASS" or why not).
std::string PushPullProbe(Bench& b) {
  const uint64_t n = 6146, d = 37440;
  cudaError_t err = EnablePeer(b.peer_dev, 0);
  KernelSide push(0, ScatteredSegs(b, n, d)), pull(b.peer_dev, push.segs());
  for (cudaError_t e : {push.status(), pull.status()}) err = err != cudaSuccess ? err : e;
  if (err != cudaSuccess) return std::string("FAIL (setup: ") + cudaGetErrorString(err) + ")";
  for (uint32_t pct : {100u, 0u, 50u, 60u, 70u}) {  // push share of the descriptors
    const uint32_t split = static_cast<uint32_t>(n * pct / 100);
    auto run = [&](int) { return PushPull(push, pull, split, n); };
    auto t = ProbeTimes(b, run, &err);
    char name[96];
    if (pct == 100 || pct == 0)
      std::snprintf(name, sizeof(name), "probe %s 6146x37440B GB/s",
                    pct == 100 ? "push (GPU0 kernel)" : "pull (GPU1 kernel)");
    else
      std::snprintf(name, sizeof(name), "probe push+pull %u/%u 6146x37440B GB/s", pct, 100 - pct);
    if (err != cudaSuccess)
      return std::string("FAIL (") + name + ": " + cudaGetErrorString(err) + ")";
    ProbeRow(b, name, n * d, t, /*write=*/true, 3, 15);
  }
  return VerifyPushPull(b, push, pull);
}

// Probe (not kvlane): a contiguous copy GPU 0 -> GPU 1 by the copy kernel and
// a done word in pinned host memory, instead of the copy engine; latency.
void KernelDoneProbe(Bench& b) {
  auto seg = [&](uint64_t len) {
    return std::vector<gpu::CopySeg>{
        {reinterpret_cast<uint64_t>(b.local), reinterpret_cast<uint64_t>(b.ref_dst), len}};
  };
  KernelSide mib2(0, seg(2 << 20)), high(0, seg(2 << 20), /*high=*/true), kib256(0, seg(256 << 10));
  for (const KernelSide* s : {&mib2, &high, &kib256}) {
    if (s->status() == cudaSuccess) continue;
    std::printf("probe SM kernel: %s\n", cudaGetErrorString(s->status()));
    return;
  }
  for (int grid : {32, 64, 128, 132, 264}) KernelDoneRows(b, mib2, grid, "2MiB");
  KernelDoneRows(b, high, 132, "2MiB hi-prio");
  for (int grid : {4, 16}) KernelDoneRows(b, kib256, grid, "256KiB");
}

}  // namespace kvlane::test
