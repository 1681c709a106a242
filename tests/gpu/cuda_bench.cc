// cuda transport benchmark: kvlane figures beside a reference measured in the
// same run (cudaMemcpyPeerAsync of the same bytes between the same two GPUs,
// synchronized from the host). Initiator: this process on GPU 0; target: a
// child process on GPU 1 (GPU 0 when there is only one).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "bench_common.h"
#include "bench_json.h"
#include "bench_probes.h"
#include "bench_targets.h"
#include "core/hop_trace.h"
#include "kvlane/kvlane.h"
#include "target_proc.h"

namespace kvlane::test {
namespace {

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
      std::snprintf(name, sizeof(name), "%s %s %s GB/s", label, OpName(op),
                    stripe ? "striped" : "one-lane");
      Row(name, len / kv / 1e3, len / ref / 1e3, "GB/s");
      (void)b.agent->Release(&h);
    }
  }
}

// `rewarm`: untimed posts at the start of every block but the first, on both
// sides. With none, the first post of a block follows the other side's block
// (an idle lane for kvlane, an idle stream for the reference): one sample in
// kBlock, 4 of a 500-sample row's 5 above its p99 if they were the slowest. The
// "block-first" row, printed when rewarm is 0, is those samples' p50.
void Latency(Bench& b, uint64_t len, const char* label, int n, std::chrono::microseconds gap = {},
             XferOptions xo = {}, int rewarm = 0) {
  for (Op op : {Op::kWrite, Op::kRead}) {
    XferHandle h = b.Make(op, Contig(MemoryKind::kCuda, reinterpret_cast<uint64_t>(b.local), len),
                          Contig(MemoryKind::kCuda, b.remote, len), xo);
    // In blocks of 100, kvlane and the reference taking turns, so that a drift
    // of the machine over the row (the reference moved 12.4-15.0 us at 2 MiB
    // between calls) weighs on both alike.
    constexpr int kBlock = 100;
    std::vector<double> kv, ref, kv_first, ref_first;
    for (int done = 0, warm = 100; done < n; done += kBlock, warm = rewarm) {
      const int m = std::min(kBlock, n - done);
      const auto k = b.Times(&h, warm, m, gap);
      const auto r = b.RefTimes(op == Op::kWrite, len, warm, m, gap);
      kv.insert(kv.end(), k.begin(), k.end());
      ref.insert(ref.end(), r.begin(), r.end());
      if (done > 0) {
        kv_first.push_back(k[0]);
        ref_first.push_back(r[0]);
      }
    }
    char name[96];
    std::snprintf(name, sizeof(name), "%s %s p50 us", label, OpName(op));
    Row(name, Pct(kv, 50), Pct(ref, 50), "us");
    std::snprintf(name, sizeof(name), "%s %s p99 us", label, OpName(op));
    Row(name, Pct(kv, 99), Pct(ref, 99), "us");
    if (rewarm == 0 && !kv_first.empty()) {
      std::snprintf(name, sizeof(name), "%s %s block-first p50 us", label, OpName(op));
      Row(name, Pct(kv_first, 50), Pct(ref_first, 50), "us");
    }
    (void)b.agent->Release(&h);
  }
}

// 4 KiB on lane 0 while lane 1 moves 2 MiB back to back.
void Beside(Bench& b) {
  const uint64_t big = 2 << 20, small = 4096;
  auto L = [&](uint64_t off, uint64_t len) {
    return Contig(MemoryKind::kCuda, reinterpret_cast<uint64_t>(b.local) + off, len);
  };
  auto R = [&](uint64_t off, uint64_t len) {
    return Contig(MemoryKind::kCuda, b.remote + off, len);
  };
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
    XferHandle hc =
        b.Make(op, Contig(MemoryKind::kCuda, reinterpret_cast<uint64_t>(b.local), total),
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
  MisalignProbe(b, ls, rs, n, d);
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
    const char* names[kHops] = {"post -> queued",         "queued -> issue",
                                "issue -> built",         "built -> submitted",
                                "submitted -> done seen", "done seen -> published",
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
  std::printf("cuda_bench: %s, %d GPUs, initiator GPU 0, target GPU %d (other process), %s\n",
              prop.name, ndev, b.peer_dev, VersionString().c_str());
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
  {  // the same with proxy renewal off, and every 4 ms: what renewal (every 1 ms) costs the tail
    AgentOptions renew;
    renew.cuda_proxy_renew_every = std::chrono::microseconds(0);
    make_agent(renew);
    Latency(b, 4096, "4KiB renewal off", 3000);
    renew.cuda_proxy_renew_every = std::chrono::milliseconds(4);
    make_agent(renew);
    Latency(b, 4096, "4KiB renewal 4ms", 3000);
    make_agent({});
  }
  Latency(b, 16 << 10, "16KiB", 1000);
  Latency(b, 64 << 10, "64KiB", 1000);
  Latency(b, 256 << 10, "256KiB", 1000);
  Latency(b, 2 << 20, "2MiB", 500);
  // The same with 2 untimed posts at each block's start, on both sides, and
  // 3000 samples: the steady state's tail, without the turn-taking's first posts.
  Latency(b, 2 << 20, "2MiB rewarmed", 3000, {}, {}, 2);
  // The same posted on one lane each time (the engine picks the least loaded,
  // ties broken by rotation): does a copy-engine stream or a proxy that served
  // the previous post serve the next one sooner?
  XferOptions lane0;
  lane0.lane = 0;
  Latency(b, 4096, "4KiB on lane 0", 3000, {}, lane0);
  Latency(b, 256 << 10, "256KiB on lane 0", 1000, {}, lane0);
  Latency(b, 2 << 20, "2MiB on lane 0", 500, {}, lane0);
  // Posted after 1 ms idle each (lanebench's pace, not back to back), both sides.
  Latency(b, 2 << 20, "2MiB after 1ms idle", 200, std::chrono::milliseconds(1));
  Latency(b, 4096, "4KiB after 1ms idle", 200, std::chrono::milliseconds(1));
  Beside(b);
  Contiguous(b, 256ull << 20, "256MiB");
  Contiguous(b, 1ull << 30, "1GiB");
  Scattered(b);
  CopyEngineProbe(b);
  // Verification (outside the timed path): the last WRITE of 64 MiB lands intact.
  XferHandle h =
      b.Make(Op::kWrite, Contig(MemoryKind::kCuda, reinterpret_cast<uint64_t>(b.local), 64 << 20),
             Contig(MemoryKind::kCuda, b.remote, 64 << 20));
  b.Once(&h);
  std::string bad =
      b.target.Call("check " + std::to_string(b.remote) + " " + std::to_string(64 << 20) + " 5");
  std::printf("verify 64 MiB WRITE: %s\n", bad == "-1" ? "PASS" : ("FAIL at " + bad).c_str());
  (*run)["verify_64MiB_write"] = bad == "-1" ? "PASS" : "FAIL at " + bad;
  // The verdicts inform; the exit code stays the verification's.
  const std::vector<TargetVerdict> verdicts = CheckTargets(Rows());
  (*run)["targets_not_met"] = PrintTargets(verdicts, ndev);
  (*run)["targets_count"] = ndev >= 2;
  for (const TargetVerdict& v : verdicts) {
    (*run)["targets"].push_back({{"target", v.target},
                                 {"measured", v.measured},
                                 {"verdict", v.missing ? "n/a"
                                             : v.met   ? "met"
                                                       : "not met"}});
  }
  b.agent.reset();
  return bad == "-1" ? 0 : 1;
}

struct Args {
  Mode mode = Mode::kFull;  // --hops, --probes2
  std::string json;         // --json PATH; empty: no JSON
  std::string targets_from;  // --targets-from PATH: the verdicts on an earlier run's JSON
  std::string command;      // the command line, for the JSON
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
    } else if (arg == "--targets-from" && i + 1 < argc) {
      a->targets_from = argv[++i];
    } else if (arg == "--json" && i + 1 < argc) {
      a->json = argv[++i];
      a->command += " " + a->json;
    } else {
      return false;
    }
  }
  return true;
}

// The verdicts on issue #6's targets of an earlier run's --json document (no GPU
// needed): 0, or 2 when the document cannot be read.
int TargetsFrom(const std::string& path) {
  std::ifstream in(path);
  nlohmann::json doc = nlohmann::json::parse(in, nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("rows") || !doc["rows"].is_array()) {
    std::fprintf(stderr, "cuda_bench: %s is no cuda_bench --json document\n", path.c_str());
    return 2;
  }
  std::vector<BenchRow> rows;
  for (const auto& r : doc["rows"]) {
    if (!r.is_object()) continue;
    rows.push_back({r.value("metric", ""), r.value("kvlane", 0.0), r.value("reference", 0.0),
                    r.value("unit", "")});
  }
  const nlohmann::json run = doc.value("run", nlohmann::json::object());
  const bool two = run.is_object() && run.value("target_gpu", 0) != run.value("initiator_gpu", 0);
  std::printf("cuda_bench: verdicts of %s\n", path.c_str());
  PrintTargets(CheckTargets(rows), two ? 2 : 1);
  return 0;
}

}  // namespace
}  // namespace kvlane::test

// usage: cuda_bench [--hops | --probes2] [--json PATH] | --targets-from PATH
int main(int argc, char** argv) {
  int rc = kvlane::test::MaybeRunTarget(argc, argv);
  if (rc >= 0) return rc;
  kvlane::test::Args args;
  if (!kvlane::test::ParseArgs(argc, argv, &args)) {
    std::fprintf(stderr, "usage: %s [--hops | --probes2] [--json PATH] | --targets-from PATH\n",
                 argv[0]);
    return 2;
  }
  if (!args.targets_from.empty()) return kvlane::test::TargetsFrom(args.targets_from);
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
