// cuda transport benchmark: kvlane figures beside a reference measured in the
// same run (cudaMemcpyPeerAsync of the same bytes between the same two GPUs,
// synchronized from the host). Initiator: this process on GPU 0; target: a
// child process on GPU 1 (GPU 0 when there is only one).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <numeric>
#include <random>
#include <sstream>
#include <thread>
#include <tuple>

#include "bench_json.h"
#include "copy_probe.h"
#include "core/hop_trace.h"
#include "gpu/copy_launch.h"
#include "kvlane/kvlane.h"
#include "target_proc.h"
#include "transport/cuda/cuda_check.h"

namespace kvlane::test {
namespace {

using Clock = std::chrono::steady_clock;

double Pct(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p / 100.0 * v.size()))];
}

struct Bench {
  std::unique_ptr<Agent> agent;
  TargetProc target;
  int peer_dev = 1;
  uint8_t* local = nullptr;   // GPU 0, this process
  uint64_t remote = 0;        // target's GPU, other process
  uint8_t* ref_dst = nullptr; // reference: a buffer on the peer GPU in this process
  uint8_t* ipc_remote = nullptr;  // probes: the target's buffer opened here through CUDA IPC
  uint64_t bytes = 0;
  cudaStream_t stream = nullptr;

  double Us(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::micro>(b - a).count(); }

  XferHandle Make(Op op, const DescList& l, const DescList& r, XferOptions xo = {}) {
    auto pl = agent->PrepareLocal(l);
    auto pr = agent->PrepareRemote("target", r);
    if (!pl.ok() || !pr.ok()) std::fprintf(stderr, "prepare: %s %s\n", pl.status().ToString().c_str(), pr.status().ToString().c_str());
    auto h = agent->MakeTransfer(op, pl.value(), {}, pr.value(), {}, {}, xo);
    if (!h.ok()) std::fprintf(stderr, "make: %s\n", h.status().ToString().c_str());
    return h.value();
  }
  // Post to host-observed completion, microseconds (spinning on Check).
  double Once(XferHandle* h) {
    auto t0 = Clock::now();
    Status s = agent->Post(h);
    while (s.in_progress() || s.ok()) {
      s = agent->Check(*h);
      if (!s.in_progress()) break;
    }
    auto t1 = Clock::now();
    if (!s.ok()) std::fprintf(stderr, "transfer failed: %s\n", s.ToString().c_str());
    return Us(t0, t1);
  }
  // `gap`: idle time before each post (0: back to back).
  std::vector<double> Times(XferHandle* h, int warm, int n, std::chrono::microseconds gap = {}) {
    for (int i = 0; i < warm; ++i) Once(h);
    std::vector<double> t;
    for (int i = 0; i < n; ++i) {
      if (gap.count() > 0) std::this_thread::sleep_for(gap);
      t.push_back(Once(h));
    }
    return t;
  }
  std::vector<double> RefTimes(bool write, uint64_t len, int warm, int n, std::chrono::microseconds gap = {}) {
    std::vector<double> t;
    for (int i = 0; i < warm + n; ++i) {
      if (gap.count() > 0 && i >= warm) std::this_thread::sleep_for(gap);
      auto t0 = Clock::now();
      if (write) cudaMemcpyPeerAsync(ref_dst, peer_dev, local, 0, len, stream);
      else cudaMemcpyPeerAsync(local, 0, ref_dst, peer_dev, len, stream);
      cudaStreamSynchronize(stream);
      if (i >= warm) t.push_back(Us(t0, Clock::now()));
    }
    return t;
  }
};

// Every row printed, for --json.
std::vector<BenchRow>& Rows() {
  static std::vector<BenchRow> rows;
  return rows;
}

void Row(const char* name, double kv, double ref, const char* unit) {
  Rows().push_back({name, kv, ref, unit});
  std::printf("| %-44s | %10.2f | %10.2f | %-5s | %6.3f |\n", name, kv, ref, unit, kv / ref);
}

DescList Contig(MemoryKind k, uint64_t addr, uint64_t len) {
  DescList d{k, {}};
  d.Add(addr, len);
  return d;
}

void Contiguous(Bench& b, uint64_t len, const char* label) {
  for (Op op : {Op::kWrite, Op::kRead}) {
    for (bool stripe : {false, true}) {
      XferHandle h = b.Make(op, Contig(MemoryKind::kCuda, reinterpret_cast<uint64_t>(b.local), len),
                            Contig(MemoryKind::kCuda, b.remote, len), XferOptions{-1, stripe});
      double kv = Pct(b.Times(&h, 2, 10), 50);
      double ref = Pct(b.RefTimes(op == Op::kWrite, len, 2, 10), 50);
      char name[96];
      std::snprintf(name, sizeof(name), "%s %s %s GB/s", label, OpName(op), stripe ? "striped" : "one-lane");
      Row(name, len / kv / 1e3, len / ref / 1e3, "GB/s");
      (void)b.agent->Release(&h);
    }
  }
}

void Latency(Bench& b, uint64_t len, const char* label, int n, std::chrono::microseconds gap = {}) {
  for (Op op : {Op::kWrite, Op::kRead}) {
    XferHandle h = b.Make(op, Contig(MemoryKind::kCuda, reinterpret_cast<uint64_t>(b.local), len),
                          Contig(MemoryKind::kCuda, b.remote, len));
    auto kv = b.Times(&h, 100, n, gap);
    auto ref = b.RefTimes(op == Op::kWrite, len, 100, n, gap);
    char name[96];
    std::snprintf(name, sizeof(name), "%s %s p50 us", label, OpName(op));
    Row(name, Pct(kv, 50), Pct(ref, 50), "us");
    std::snprintf(name, sizeof(name), "%s %s p99 us", label, OpName(op));
    Row(name, Pct(kv, 99), Pct(ref, 99), "us");
    (void)b.agent->Release(&h);
  }
}

// 4 KiB on lane 0 while lane 1 moves 2 MiB back to back.
void Beside(Bench& b) {
  const uint64_t big = 2 << 20, small = 4096;
  auto L = [&](uint64_t off, uint64_t len) { return Contig(MemoryKind::kCuda, reinterpret_cast<uint64_t>(b.local) + off, len); };
  auto R = [&](uint64_t off, uint64_t len) { return Contig(MemoryKind::kCuda, b.remote + off, len); };
  XferHandle hb = b.Make(Op::kWrite, L(64 << 20, big), R(64 << 20, big), XferOptions{1, false});
  XferHandle hs = b.Make(Op::kWrite, L(0, small), R(0, small), XferOptions{0, false});
  auto bulk_for = [&](double seconds, std::atomic<bool>* stop) {
    uint64_t moved = 0;
    auto t0 = Clock::now();
    while (!stop->load() && std::chrono::duration<double>(Clock::now() - t0).count() < seconds) {
      b.Once(&hb);
      moved += big;
    }
    return moved / std::chrono::duration<double>(Clock::now() - t0).count() / 1e9;
  };
  std::atomic<bool> never{false};
  double solo = bulk_for(1.0, &never);
  double solo_small = Pct(b.Times(&hs, 100, 2000), 99);
  std::atomic<bool> stop{false};
  double shared = 0;
  std::thread bg([&] { shared = bulk_for(30.0, &stop); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  auto t = b.Times(&hs, 100, 3000);
  stop = true;
  bg.join();
  Row("4KiB WRITE beside 2MiB: p50 us (vs solo p99)", Pct(t, 50), solo_small, "us");
  Row("4KiB WRITE beside 2MiB: p99 us (vs solo p99)", Pct(t, 99), solo_small, "us");
  Row("2MiB bulk lane GB/s beside 4KiB (vs solo)", shared, solo, "GB/s");
  (void)b.agent->Release(&hb);
  (void)b.agent->Release(&hs);
}

// Host-observed microseconds of `run(it)` (which issues GPU work and waits for
// it): 3 warm-ups, then 10 samples; stops at the first error `run` returns,
// which lands in *err.
std::vector<double> ProbeTimes(Bench& b, const std::function<cudaError_t(int)>& run, cudaError_t* err = nullptr) {
  std::vector<double> t;
  cudaError_t e = cudaSuccess;
  for (int it = 0; it < 13 && e == cudaSuccess; ++it) {
    auto t0 = Clock::now();
    e = run(it);
    if (it >= 3) t.push_back(b.Us(t0, Clock::now()));
  }
  if (err != nullptr) *err = e;
  return t;
}

// A probe's rate over `bytes` beside the reference (cudaMemcpyPeerAsync of the
// same bytes; p50 of ref_n samples after ref_warm warm-ups).
void ProbeRow(Bench& b, const char* name, uint64_t bytes, const std::vector<double>& t,
              bool write = true, int ref_warm = 1, int ref_n = 5) {
  const double ref = Pct(b.RefTimes(write, bytes, ref_warm, ref_n), 50);
  Row(name, bytes / Pct(t, 50) / 1e3, bytes / ref / 1e3, "GB/s");
}

// Probe (not kvlane): the bare copy kernel over the scattered list, GPU 0 ->
// GPU 1 in this process, for several work cuts; microseconds per launch.
void KernelSweep(Bench& b, const std::vector<uint32_t>& ls, const std::vector<uint32_t>& rs, uint64_t n, uint64_t d) {
  std::vector<gpu::CopySeg> h(n);
  for (uint64_t i = 0; i < n; ++i)
    h[i] = {reinterpret_cast<uint64_t>(b.local) + ls[i] * d, reinterpret_cast<uint64_t>(b.ref_dst) + rs[i] * d, d};
  gpu::CopySeg* segs = nullptr;
  uint32_t* fin = nullptr;
  uint64_t* done = nullptr;
  cudaMalloc(reinterpret_cast<void**>(&segs), n * sizeof(gpu::CopySeg));
  cudaMalloc(reinterpret_cast<void**>(&fin), 4);
  cudaMemset(fin, 0, 4);
  cudaHostAlloc(reinterpret_cast<void**>(&done), 8, cudaHostAllocMapped);
  cudaMemcpy(segs, h.data(), n * sizeof(gpu::CopySeg), cudaMemcpyHostToDevice);
  for (uint32_t parts : {1u, 2u, 3u}) {
    for (int grid : {static_cast<int>(n * parts), 528, 1056}) {
      auto t = ProbeTimes(b, [&](int it) {
        gpu::LaunchCopySegments(segs, 0, static_cast<uint32_t>(n), parts, grid,
                                {fin, done, uint64_t(it)}, gpu::BlockFence::kSystem, b.stream);
        (void)cudaStreamSynchronize(b.stream);
        return cudaSuccess;
      });
      char name[96];
      std::snprintf(name, sizeof(name), "probe kernel parts=%u grid=%d GB/s", parts, grid);
      ProbeRow(b, name, n * d, t);
    }
  }
  // Probe: variants of the copy loop (copy_probe.cu), one block per descriptor.
  for (const ProbeVariant& v : kProbeVariants) {
    cudaError_t err = cudaSuccess;
    auto t = ProbeTimes(b, [&](int) {
      cudaError_t e = LaunchProbe(v, segs, static_cast<uint32_t>(n), b.stream);
      return e == cudaSuccess ? cudaStreamSynchronize(b.stream) : e;
    }, &err);
    char name[96];
    std::snprintf(name, sizeof(name), "probe loop %s GB/s", v.name);
    if (err == cudaSuccess)
      ProbeRow(b, name, n * d, t);
    else
      std::printf("%s: %s\n", name, cudaGetErrorString(err));
    (void)cudaGetLastError();
  }
  // Probe: the bulk-copy (TMA) kernel, with every destination byte checked once.
  {
    const uint32_t parts = static_cast<uint32_t>((d + gpu::kTmaUnitBytes - 1) / gpu::kTmaUnitBytes);
    cudaMemset(b.ref_dst, 0xab, 2 * n * d);
    cudaDeviceSynchronize();
    cudaError_t err = gpu::LaunchCopySegmentsTma(segs, 0, static_cast<uint32_t>(n), parts,
                                                 static_cast<int>(n * parts), {fin, done, 99},
                                                 gpu::BlockFence::kSystem, b.stream);
    if (err == cudaSuccess) err = cudaStreamSynchronize(b.stream);
    int64_t bad = err == cudaSuccess ? -1 : -2;
    std::vector<uint8_t> hs(d), hd(d);
    for (uint64_t i = 0; i < n && bad == -1; ++i) {
      cudaMemcpy(hs.data(), reinterpret_cast<void*>(h[i].src), d, cudaMemcpyDefault);
      cudaMemcpy(hd.data(), reinterpret_cast<void*>(h[i].dst), d, cudaMemcpyDefault);
      if (hs != hd) bad = static_cast<int64_t>(i);
    }
    std::printf("probe tma kernel verify: %s\n", bad == -1 ? "PASS" : bad == -2 ? cudaGetErrorString(err) : ("FAIL at desc " + std::to_string(bad)).c_str());
    (void)cudaGetLastError();
    for (int grid : {static_cast<int>(n * parts), 264, 528, 1056}) {
      if (bad != -1) break;
      auto t = ProbeTimes(b, [&](int it) {
        gpu::LaunchCopySegmentsTma(segs, 0, static_cast<uint32_t>(n), parts, grid,
                                   {fin, done, uint64_t(it)}, gpu::BlockFence::kSystem, b.stream);
        (void)cudaStreamSynchronize(b.stream);
        return cudaSuccess;
      });
      char name[96];
      std::snprintf(name, sizeof(name), "probe tma kernel grid=%d GB/s", grid);
      ProbeRow(b, name, n * d, t);
    }
    // READ direction (remote -> local) with the TMA kernel and the current kernel.
    std::vector<gpu::CopySeg> rv(h);
    for (auto& g : rv) std::swap(g.src, g.dst);
    cudaMemcpy(segs, rv.data(), n * sizeof(gpu::CopySeg), cudaMemcpyHostToDevice);
    for (int tma = 0; tma < 2 && bad == -1; ++tma) {
      auto t = ProbeTimes(b, [&](int it) {
        if (tma)
          gpu::LaunchCopySegmentsTma(segs, 0, static_cast<uint32_t>(n), parts,
                                     static_cast<int>(n * parts), {fin, done, uint64_t(it)},
                                     gpu::BlockFence::kDevice, b.stream);
        else
          gpu::LaunchCopySegments(segs, 0, static_cast<uint32_t>(n), 1, static_cast<int>(n),
                                  {fin, done, uint64_t(it)}, gpu::BlockFence::kDevice,
                                  b.stream);  // into GPU 0: as the engine's READ
        (void)cudaStreamSynchronize(b.stream);
        return cudaSuccess;
      });
      ProbeRow(b, tma ? "probe tma kernel READ grid=6146 GB/s" : "probe kernel READ parts=1 grid=6146 GB/s", n * d, t,
               /*write=*/false);
    }
    cudaMemcpy(segs, h.data(), n * sizeof(gpu::CopySeg), cudaMemcpyHostToDevice);
  }
  // Probe: one copy-engine batch (cudaMemcpyBatchAsync) for the same list.
  std::vector<void*> dsts(n), srcs(n);
  std::vector<size_t> sizes(n, d);
  for (uint64_t i = 0; i < n; ++i) dsts[i] = reinterpret_cast<void*>(h[i].dst), srcs[i] = reinterpret_cast<void*>(h[i].src);
  cudaMemcpyAttributes attr{};
  attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
  size_t idx = 0;
  cudaError_t err = cudaSuccess;
  auto t = ProbeTimes(b, [&](int) {
    cudaError_t e = cudaMemcpyBatchAsync(dsts.data(), const_cast<const void* const*>(srcs.data()), sizes.data(), n,
                                         &attr, &idx, 1, b.stream);
    (void)cudaStreamSynchronize(b.stream);
    return e;
  }, &err);
  if (err == cudaSuccess)
    ProbeRow(b, "probe cudaMemcpyBatchAsync 6146x37440B GB/s", n * d, t);
  else
    std::printf("probe cudaMemcpyBatchAsync: %s\n", cudaGetErrorString(err));
  (void)cudaGetLastError();
  // Probe: the kernel on the head of the list and one copy-engine batch on its
  // tail, at once on two streams (does the copy engine add to the SM stores?).
  cudaStream_t side = nullptr;
  cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking);
  for (uint32_t pct : {4u, 8u, 12u, 16u}) {
    const uint64_t tail = n * pct / 100, head = n - tail;
    auto th = ProbeTimes(b, [&](int it) {
      cudaError_t e = cudaMemcpyBatchAsync(dsts.data() + head, const_cast<const void* const*>(srcs.data() + head),
                                           sizes.data() + head, tail, &attr, &idx, 1, side);
      gpu::LaunchCopySegments(segs, 0, static_cast<uint32_t>(head), 1, static_cast<int>(head),
                              {fin, done, uint64_t(it)}, gpu::BlockFence::kSystem, b.stream);
      (void)cudaStreamSynchronize(b.stream);
      (void)cudaStreamSynchronize(side);
      return e;
    }, &err);
    char name[96];
    std::snprintf(name, sizeof(name), "probe kernel + CE batch (%u%% of descs) GB/s", pct);
    if (err == cudaSuccess)
      ProbeRow(b, name, n * d, th);
    (void)cudaGetLastError();
  }
  cudaStreamDestroy(side);
  cudaFree(segs);
  cudaFree(fin);
  cudaFreeHost(done);
}

// Probe (not kvlane): the copy-engine mechanism of the bulk path alone, on the
// target's IPC-mapped buffer: cudaMemcpyAsync + cuStreamWriteValue64 into
// pinned host memory that this thread polls, and cudaMemcpyAsync +
// cudaStreamSynchronize; each beside the reference of the same bytes.
// Runs after every kvlane row: the agent opened the same handle before.
void CopyEngineProbe(Bench& b) {
  std::string ipc = Unhex(b.target.Call("ipc " + std::to_string(b.remote)));
  if (ipc.size() == sizeof(cudaIpcMemHandle_t)) {
    cudaIpcMemHandle_t hnd;
    std::memcpy(&hnd, ipc.data(), sizeof(hnd));
    void* p = nullptr;
    cudaError_t e = cudaIpcOpenMemHandle(&p, hnd, cudaIpcMemLazyEnablePeerAccess);
    if (e == cudaSuccess) b.ipc_remote = static_cast<uint8_t*>(p);
    else std::printf("probe copy engine: cudaIpcOpenMemHandle: %s\n", cudaGetErrorString(e));
    (void)cudaGetLastError();
  }
  if (b.ipc_remote == nullptr || kvlane::core::Driver().write_value64 == nullptr) {
    std::printf("probe copy engine: no IPC mapping or no cuStreamWriteValue64\n");
    return;
  }
  uint64_t* word = nullptr;
  cudaHostAlloc(reinterpret_cast<void**>(&word), 64, cudaHostAllocMapped | cudaHostAllocPortable);
  *word = 0;
  uint64_t value = 0;
  auto memop = [&](uint64_t len) {
    auto t0 = Clock::now();
    cudaMemcpyAsync(b.ipc_remote, b.local, len, cudaMemcpyDefault, b.stream);
    (void)kvlane::core::Driver().write_value64(b.stream, reinterpret_cast<unsigned long long>(word), ++value, 0);
    while (std::atomic_ref<uint64_t>(*word).load(std::memory_order_acquire) != value) {
    }
    return b.Us(t0, Clock::now());
  };
  auto sync = [&](uint64_t len) {
    auto t0 = Clock::now();
    cudaMemcpyAsync(b.ipc_remote, b.local, len, cudaMemcpyDefault, b.stream);
    cudaStreamSynchronize(b.stream);
    return b.Us(t0, Clock::now());
  };
  for (uint64_t len : {uint64_t{2} << 20, uint64_t{256} << 20, uint64_t{1} << 30}) {
    const bool lat = len <= (2u << 20);
    const int n = lat ? 500 : 10, warm = lat ? 100 : 2;
    std::vector<double> tm, ts;
    for (int i = 0; i < warm + n; ++i) {
      double a = memop(len), c = sync(len);
      if (i >= warm) tm.push_back(a), ts.push_back(c);
    }
    auto ref = b.RefTimes(true, len, warm, n);
    char name[96];
    const char* lab = len == (2u << 20) ? "2MiB" : len == (256u << 20) ? "256MiB" : "1GiB";
    if (lat) {
      std::snprintf(name, sizeof(name), "probe CE+writeValue64 IPC %s p50 us", lab);
      Row(name, Pct(tm, 50), Pct(ref, 50), "us");
      std::snprintf(name, sizeof(name), "probe CE+writeValue64 IPC %s p99 us", lab);
      Row(name, Pct(tm, 99), Pct(ref, 99), "us");
      std::snprintf(name, sizeof(name), "probe CE+streamSync IPC %s p50 us", lab);
      Row(name, Pct(ts, 50), Pct(ref, 50), "us");
    } else {
      std::snprintf(name, sizeof(name), "probe CE+writeValue64 IPC %s GB/s", lab);
      Row(name, len / Pct(tm, 50) / 1e3, len / Pct(ref, 50) / 1e3, "GB/s");
      std::snprintf(name, sizeof(name), "probe CE+streamSync IPC %s GB/s", lab);
      Row(name, len / Pct(ts, 50) / 1e3, len / Pct(ref, 50) / 1e3, "GB/s");
    }
  }
  cudaFreeHost(word);
}

// Slots of the scattered list: descriptor i goes from local slot (*ls)[i] to
// remote slot (*rs)[i], both shuffled permutations of 2n slots (seed 1).
void ShuffledSlots(uint64_t n, std::vector<uint32_t>* ls, std::vector<uint32_t>* rs) {
  ls->resize(2 * n);
  rs->resize(2 * n);
  std::iota(ls->begin(), ls->end(), 0);
  std::iota(rs->begin(), rs->end(), 0);
  std::mt19937 rng(1);
  std::shuffle(ls->begin(), ls->end(), rng);
  std::shuffle(rs->begin(), rs->end(), rng);
}

// 6,146 descriptors of 37,440 B at shuffled slots of a pool on each side.
void Scattered(Bench& b) {
  const uint64_t n = 6146, d = 37440, total = n * d;
  std::vector<uint32_t> ls, rs;
  ShuffledSlots(n, &ls, &rs);
  for (Op op : {Op::kWrite, Op::kRead}) {
    DescList l{MemoryKind::kCuda, {}}, r{MemoryKind::kCuda, {}};
    for (uint64_t i = 0; i < n; ++i) {
      l.Add(reinterpret_cast<uint64_t>(b.local) + ls[i] * d, d);
      r.Add(b.remote + rs[i] * d, d);
    }
    XferHandle hs = b.Make(op, l, r, XferOptions{-1, false});
    XferHandle hc = b.Make(op, Contig(MemoryKind::kCuda, reinterpret_cast<uint64_t>(b.local), total),
                           Contig(MemoryKind::kCuda, b.remote, total), XferOptions{-1, false});
    double ts = Pct(b.Times(&hs, 3, 15), 50);
    double tc = Pct(b.Times(&hc, 3, 15), 50);
    double ref = Pct(b.RefTimes(op == Op::kWrite, total, 3, 15), 50);
    char name[96];
    std::snprintf(name, sizeof(name), "6146x37440B %s GB/s (vs kvlane contig)", OpName(op));
    Row(name, total / ts / 1e3, total / tc / 1e3, "GB/s");
    std::snprintf(name, sizeof(name), "6146x37440B %s GB/s (vs reference)", OpName(op));
    Row(name, total / ts / 1e3, total / ref / 1e3, "GB/s");
    std::snprintf(name, sizeof(name), "6146x37440B %s ns/desc (vs ref contig)", OpName(op));
    Row(name, ts * 1e3 / n, ref * 1e3 / n, "ns");
    (void)b.agent->Release(&hs);
    (void)b.agent->Release(&hc);
  }
  KernelSweep(b, ls, rs, n, d);
}

// ---- --probes2: bare mechanisms beside the reference, in this process only.

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
    // Acquire: pairs with the last block's fence + store of `done` (StoreSystem).
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

// Trace build only (KVLANE_HOP_TRACE): where a 4 KiB (and a 2 MiB) request's time goes,
// hop by hop, p50 and p99 of each (posted one at a time).
void HopRows(Bench& b) {
  for (auto [op, len, label] : {std::tuple{Op::kWrite, uint64_t{4096}, "4KiB"},
                                {Op::kRead, uint64_t{4096}, "4KiB"},
                                {Op::kWrite, uint64_t{2} << 20, "2MiB"}}) {
    XferHandle h = b.Make(op, Contig(MemoryKind::kCuda, reinterpret_cast<uint64_t>(b.local), len),
                          Contig(MemoryKind::kCuda, b.remote, len));
    // One interval per hop (kHopQueued..kHopPublished), then to Check, then Post's own time.
    constexpr int kHops = kvlane::core::kHopCount + 2;
    const char* names[kHops] = {"post -> queued",         "queued -> issue",      "issue -> built",
                                "built -> submitted",     "submitted -> done seen", "done seen -> published",
                                "published -> Check ok",  "post returned"};
    std::vector<double> d[kHops], total;
    uint64_t by_poster = 0;
    for (int i = 0; i < 3100; ++i) {
      const int64_t t0 = kvlane::core::HopNow();
      Status s = b.agent->Post(&h);
      const int64_t tp = kvlane::core::HopNow();
      while (s.in_progress() || s.ok()) {
        s = b.agent->Check(h);
        if (!s.in_progress()) break;
      }
      const int64_t t1 = kvlane::core::HopNow();
      if (i < 100) continue;
      auto& hp = kvlane::core::Hops();
      constexpr int kN = kvlane::core::kHopCount;
      int64_t t[kN];
      for (int k = 0; k < kN; ++k) t[k] = hp.t[k].load();
      d[0].push_back((t[0] - t0) / 1e3);
      for (int k = 1; k < kN; ++k) d[k].push_back((t[k] - t[k - 1]) / 1e3);
      d[kN].push_back((t1 - t[kN - 1]) / 1e3);
      d[kN + 1].push_back((tp - t0) / 1e3);
      total.push_back((t1 - t0) / 1e3);
      by_poster += hp.by_poster.load();
    }
    for (int k = 0; k < kHops; ++k) {
      char name[96];
      std::snprintf(name, sizeof(name), "hop %s %s %s us p50 (p99)", label, OpName(op), names[k]);
      Row(name, Pct(d[k], 50), Pct(d[k], 99), "us");
    }
    char name[96];
    std::snprintf(name, sizeof(name), "hop %s %s total us p50 (p99)", label, OpName(op));
    Row(name, Pct(total, 50), Pct(total, 99), "us");
    std::printf("hop %s %s: issued by the posting thread %llu of %zu\n", label, OpName(op),
                static_cast<unsigned long long>(by_poster), total.size());
    (void)b.agent->Release(&h);
  }
}

void Header() {
  std::printf("| %-44s | %10s | %10s | %-5s | %6s |\n", "metric", "kvlane", "reference", "unit",
              "ratio");
  std::printf("|%s|%s|%s|%s|%s|\n", std::string(46, '-').c_str(), std::string(12, '-').c_str(),
              std::string(12, '-').c_str(), std::string(7, '-').c_str(),
              std::string(8, '-').c_str());
}

// What a run measures: the kvlane rows and the probes, the hop trace (--hops),
// or only the probes of PushPullProbe and KernelDoneProbe (--probes2).
enum class Mode { kFull, kHops, kProbes2 };

const char* ModeName(Mode m) {
  return m == Mode::kHops ? "hops" : m == Mode::kProbes2 ? "probes2" : "full";
}

// --probes2: in this process only (no target process, no agent).
int Probes2(Bench& b, int ndev, nlohmann::json* run) {
  if (ndev < 2) {
    std::printf("cuda_bench --probes2: needs 2 GPUs\n");
    (*run)["error"] = "needs 2 GPUs";
    return 1;
  }
  std::printf("probes2: this process only, GPU 0 and GPU 1; no kvlane rows\n");
  Header();
  const std::string verify = PushPullProbe(b);
  std::printf("probe push+pull verify: %s\n", verify.c_str());
  (*run)["verify_push_pull"] = verify;
  KernelDoneProbe(b);
  return verify == "PASS" ? 0 : 1;
}

// Runs the benchmark; what it ran on and the verification go into `run`.
int Main(Mode mode, nlohmann::json* run) {
  int ndev = 0;
  *run = {{"mode", ModeName(mode)}};
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    std::printf("cuda_bench: no CUDA device\n");
    (*run)["error"] = "no CUDA device";
    return 1;
  }
  Bench b;
  b.peer_dev = ndev > 1 ? 1 : 0;
  (*run)["initiator_gpu"] = 0;
  (*run)["target_gpu"] = b.peer_dev;
  const uint64_t kPool = 1ull << 30;
  cudaSetDevice(b.peer_dev);
  cudaMalloc(reinterpret_cast<void**>(&b.ref_dst), kPool);
  cudaSetDevice(0);
  if (b.peer_dev != 0) cudaDeviceEnablePeerAccess(b.peer_dev, 0);
  cudaMalloc(reinterpret_cast<void**>(&b.local), kPool);
  cudaStreamCreateWithFlags(&b.stream, cudaStreamNonBlocking);
  FillDevice(b.local, 512 << 20, 5);  // the scattered list and the probes read up to 460 MB
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  std::printf("cuda_bench: %s, %d GPUs, initiator GPU 0, target GPU %d (other process), %s\n", prop.name, ndev,
              b.peer_dev, VersionString().c_str());
  if (mode == Mode::kProbes2) return Probes2(b, ndev, run);
  b.target = TargetProc::Spawn(b.peer_dev);
  std::istringstream in(b.target.Call("alloc " + std::to_string(kPool)));
  in >> b.remote;

  auto make_agent = [&](AgentOptions o) {
    b.agent.reset();
    o.name = "init";
    o.transports = {"cuda"};
    b.agent = std::move(Agent::Create(o)).value();
    (void)b.agent->RegisterMemory(b.local, kPool, MemoryKind::kCuda, 0);
    (void)b.agent->LoadPeer(Unhex(b.target.Call("meta")));
  };
  make_agent({});
  Header();
  if (mode == Mode::kHops) {
    HopRows(b);
    b.agent.reset();
    return 0;
  }
  Latency(b, 4096, "4KiB", 3000);
  {  // the same with proxy renewal off: what renewal (every 1 ms) costs the tail
    AgentOptions no_renew;
    no_renew.cuda_proxy_renew_every = std::chrono::microseconds(0);
    make_agent(no_renew);
    Latency(b, 4096, "4KiB renewal off", 3000);
    make_agent({});
  }
  Latency(b, 16 << 10, "16KiB", 1000);
  Latency(b, 64 << 10, "64KiB", 1000);
  Latency(b, 256 << 10, "256KiB", 1000);
  Latency(b, 2 << 20, "2MiB", 500);
  // Posted after 1 ms idle each (lanebench's pace, not back to back), both sides.
  Latency(b, 2 << 20, "2MiB after 1ms idle", 200, std::chrono::milliseconds(1));
  Latency(b, 4096, "4KiB after 1ms idle", 200, std::chrono::milliseconds(1));
  Beside(b);
  Contiguous(b, 256ull << 20, "256MiB");
  Contiguous(b, 1ull << 30, "1GiB");
  Scattered(b);
  CopyEngineProbe(b);
  // Verification (outside the timed path): the last WRITE of 64 MiB lands intact.
  XferHandle h = b.Make(Op::kWrite, Contig(MemoryKind::kCuda, reinterpret_cast<uint64_t>(b.local), 64 << 20),
                        Contig(MemoryKind::kCuda, b.remote, 64 << 20));
  b.Once(&h);
  std::string bad = b.target.Call("check " + std::to_string(b.remote) + " " + std::to_string(64 << 20) + " 5");
  std::printf("verify 64 MiB WRITE: %s\n", bad == "-1" ? "PASS" : ("FAIL at " + bad).c_str());
  (*run)["verify_64MiB_write"] = bad == "-1" ? "PASS" : "FAIL at " + bad;
  b.agent.reset();
  return bad == "-1" ? 0 : 1;
}

struct Args {
  Mode mode = Mode::kFull;  // --hops, --probes2
  std::string json;     // --json PATH; empty: no JSON
  std::string command;  // the command line, for the JSON
};

// False on an argument it does not know.
bool ParseArgs(int argc, char** argv, Args* a) {
  a->command = argv[0];
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    a->command += " " + arg;
    if (arg == "--hops") {
      a->mode = Mode::kHops;
    } else if (arg == "--probes2") {
      a->mode = Mode::kProbes2;
    } else if (arg == "--json" && i + 1 < argc) {
      a->json = argv[++i];
      a->command += " " + a->json;
    } else {
      return false;
    }
  }
  return true;
}

}  // namespace
}  // namespace kvlane::test

// usage: cuda_bench [--hops | --probes2] [--json PATH]
int main(int argc, char** argv) {
  int rc = kvlane::test::MaybeRunTarget(argc, argv);
  if (rc >= 0) return rc;
  kvlane::test::Args args;
  if (!kvlane::test::ParseArgs(argc, argv, &args)) {
    std::fprintf(stderr, "usage: %s [--hops | --probes2] [--json PATH]\n", argv[0]);
    return 2;
  }
  if (!args.json.empty() && !std::ofstream(args.json)) {  // fail before the run, not after
    std::fprintf(stderr, "cuda_bench: cannot write %s\n", args.json.c_str());
    return 2;
  }
  nlohmann::json run;
  rc = kvlane::test::Main(args.mode, &run);
  run["exit_code"] = rc;
  if (!args.json.empty() &&
      !kvlane::test::WriteBenchJson(args.json, args.command, run, kvlane::test::Rows()))
    return rc == 0 ? 1 : rc;
  return rc;
}
