// Micro-benchmarks of the hot path on the local transport: post + check of a
// tiny prepared transfer until it completes, and Check() alone on a finished
// handle (an acquire load and a compare). Not tests: run by hand.
#include <benchmark/benchmark.h>

#include <memory>
#include <vector>

#include "kvlane/kvlane.h"

namespace kvlane {
namespace {

struct Fixture {
  explicit Fixture(uint64_t bytes, ProgressPolicy policy) : src(bytes, 1), dst(bytes, 0) {
    AgentOptions o;
    o.transports = {"local"};
    o.policy = policy;
    o.name = "a";
    a = std::move(Agent::Create(o).value());
    o.name = "b";
    b = std::move(Agent::Create(o).value());
    (void)a->RegisterMemory(src.data(), bytes).value();
    (void)b->RegisterMemory(dst.data(), bytes).value();
    (void)a->LoadPeer(b->ExportMetadata().value()).value();
    DescList l, r;
    l.Add(src.data(), bytes);
    r.Add(dst.data(), bytes);
    h = a->MakeTransfer(Op::kWrite, a->PrepareLocal(l).value(), {}, a->PrepareRemote("b", r).value(), {})
            .value();
  }
  std::vector<uint8_t> src, dst;
  std::unique_ptr<Agent> a, b;
  XferHandle h;
};

// One iteration: Post, then Check until the request is no longer in progress.
void BM_PostCheck(benchmark::State& state) {
  Fixture f(static_cast<uint64_t>(state.range(0)), static_cast<ProgressPolicy>(state.range(1)));
  uint64_t checks = 0;
  for (auto _ : state) {
    if (f.a->Post(&f.h).is_error()) state.SkipWithError("post failed");
    Status s = f.a->Check(f.h);
    for (; s.in_progress(); s = f.a->Check(f.h)) ++checks;
    if (!s.ok()) state.SkipWithError("transfer failed");
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["checks_per_req"] = benchmark::Counter(static_cast<double>(checks) / state.iterations());
  state.SetLabel(PolicyName(static_cast<ProgressPolicy>(state.range(1))));
}
BENCHMARK(BM_PostCheck)
    ->Args({64, 0})
    ->Args({4096, 0})
    ->Args({64, 1})
    ->ArgNames({"bytes", "policy"})
    ->UseRealTime();

// Post + Wait (spins up to AgentOptions.spin, then sleeps): the usual caller.
void BM_PostWait(benchmark::State& state) {
  Fixture f(64, ProgressPolicy::kIndependent);
  for (auto _ : state) {
    if (f.a->Post(&f.h).is_error()) state.SkipWithError("post failed");
    if (!f.a->Wait(f.h, std::chrono::seconds(10)).ok()) state.SkipWithError("transfer failed");
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_PostWait)->UseRealTime();

// Post alone, the caller's cost: 64 handles posted back to back per iteration;
// waiting for them is outside the timing.
void BM_Post64(benchmark::State& state) {
  Fixture f(64 * 64, ProgressPolicy::kIndependent);
  DescList l, r;
  std::vector<XferHandle> hs;
  for (int i = 0; i < 64; ++i) {
    DescList li, ri;
    li.Add(f.src.data() + i * 64, 64);
    ri.Add(f.dst.data() + i * 64, 64);
    hs.push_back(f.a->MakeTransfer(Op::kWrite, f.a->PrepareLocal(li).value(), {},
                                   f.a->PrepareRemote("b", ri).value(), {})
                     .value());
  }
  for (auto _ : state) {
    for (auto& h : hs)
      if (f.a->Post(&h).is_error()) state.SkipWithError("post failed");
    state.PauseTiming();
    for (auto& h : hs) (void)f.a->Wait(h, std::chrono::seconds(10));
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * 64);
}
BENCHMARK(BM_Post64);

// Check() on a finished handle: what a poller pays per look.
void BM_CheckFinished(benchmark::State& state) {
  Fixture f(64, ProgressPolicy::kIndependent);
  (void)f.a->Post(&f.h);
  (void)f.a->Wait(f.h, std::chrono::seconds(10));
  for (auto _ : state) {
    Status s = f.a->Check(f.h);
    benchmark::DoNotOptimize(s);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_CheckFinished);

}  // namespace
}  // namespace kvlane

BENCHMARK_MAIN();
