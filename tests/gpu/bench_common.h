// Pieces of cuda_bench shared by its rows (cuda_bench.cc) and its probes
// (bench_probes.cc, bench_probes2.cc): the two GPUs' buffers and the agent
// (Bench), the reference copy, percentiles, and the printed table, whose every
// row is kept for --json.
#pragma once

#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench_json.h"
#include "gpu/copy_types.h"
#include "kvlane/kvlane.h"
#include "percentile.h"
#include "target_proc.h"

namespace kvlane::test {

using Clock = std::chrono::steady_clock;

struct Bench {
  std::unique_ptr<Agent> agent;
  TargetProc target;
  int peer_dev = 1;
  uint8_t* local = nullptr;       // GPU 0, this process
  uint64_t remote = 0;            // target's GPU, other process
  uint8_t* ref_dst = nullptr;     // reference: a buffer on the peer GPU in this process
  uint8_t* ipc_remote = nullptr;  // probes: the target's buffer opened here through CUDA IPC
  uint64_t bytes = 0;
  cudaStream_t stream = nullptr;

  double Us(Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double, std::micro>(b - a).count();
  }

  XferHandle Make(Op op, const DescList& l, const DescList& r, XferOptions xo = {}) {
    auto pl = agent->PrepareLocal(l);
    auto pr = agent->PrepareRemote("target", r);
    if (!pl.ok() || !pr.ok())
      std::fprintf(stderr, "prepare: %s %s\n", pl.status().ToString().c_str(),
                   pr.status().ToString().c_str());
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
  std::vector<double> RefTimes(bool write, uint64_t len, int warm, int n,
                               std::chrono::microseconds gap = {}) {
    std::vector<double> t;
    for (int i = 0; i < warm + n; ++i) {
      if (gap.count() > 0 && i >= warm) std::this_thread::sleep_for(gap);
      auto t0 = Clock::now();
      if (write)
        cudaMemcpyPeerAsync(ref_dst, peer_dev, local, 0, len, stream);
      else
        cudaMemcpyPeerAsync(local, 0, ref_dst, peer_dev, len, stream);
      cudaStreamSynchronize(stream);
      if (i >= warm) t.push_back(Us(t0, Clock::now()));
    }
    return t;
  }
};

// What a probe launching the copy kernel directly needs, freed on scope exit:
// the descriptor table on the GPU (n segments), the kernel's finish counter
// (zeroed) and its mapped host completion word.
struct KernelScratch {
  gpu::CopySeg* segs = nullptr;
  uint32_t* fin = nullptr;
  uint64_t* done = nullptr;

  explicit KernelScratch(uint64_t n) {
    cudaMalloc(reinterpret_cast<void**>(&segs), n * sizeof(gpu::CopySeg));
    cudaMalloc(reinterpret_cast<void**>(&fin), sizeof(uint32_t));
    cudaMemset(fin, 0, sizeof(uint32_t));
    cudaHostAlloc(reinterpret_cast<void**>(&done), sizeof(uint64_t), cudaHostAllocMapped);
  }
  ~KernelScratch() {
    cudaFree(segs);
    cudaFree(fin);
    cudaFreeHost(done);
  }
  KernelScratch(const KernelScratch&) = delete;
  KernelScratch& operator=(const KernelScratch&) = delete;
};

// Every row printed, for --json.
std::vector<BenchRow>& Rows();

// Prints one table row (ratio = kv / ref) and keeps it in Rows().
void Row(const char* name, double kv, double ref, const char* unit);

// The table's header lines, in the columns of Row.
void Header();

// Host-observed microseconds of `run(it)` (which issues GPU work and waits for
// it): 3 warm-ups, then 10 samples; stops at the first error `run` returns,
// which lands in *err.
std::vector<double> ProbeTimes(Bench& b, const std::function<cudaError_t(int)>& run,
                               cudaError_t* err = nullptr);

// A probe's rate over `bytes` beside the reference (cudaMemcpyPeerAsync of the
// same bytes; p50 of ref_n samples after ref_warm warm-ups).
void ProbeRow(Bench& b, const char* name, uint64_t bytes, const std::vector<double>& t,
              bool write = true, int ref_warm = 1, int ref_n = 5);

// Slots of the scattered list: descriptor i goes from local slot (*ls)[i] to
// remote slot (*rs)[i], both shuffled permutations of 2n slots (seed 1).
void ShuffledSlots(uint64_t n, std::vector<uint32_t>* ls, std::vector<uint32_t>* rs);

}  // namespace kvlane::test
