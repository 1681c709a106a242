#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bench_common.h"
#include "bench_probes.h"
#include "copy_probe.h"
#include "gpu/copy_launch.h"
#include "percentile.h"

namespace kvlane::test {
namespace {

// What the destination span should hold after segs moved: `fill` except
// where a descriptor landed; "" when it does, else where it does not (or why
// it could not be read back).
std::string CheckSpan(const std::vector<gpu::CopySeg>& segs, const uint8_t* src_base,
                      const uint8_t* dst_base, uint64_t span, uint8_t fill) {
  std::vector<uint8_t> hs(span), hd(span), want(span, fill);
  if (cudaError_t e = cudaMemcpy(hs.data(), src_base, span, cudaMemcpyDefault); e != cudaSuccess)
    return std::string("reading the source back: ") + cudaGetErrorString(e);
  if (cudaError_t e = cudaMemcpy(hd.data(), dst_base, span, cudaMemcpyDefault); e != cudaSuccess)
    return std::string("reading the destination back: ") + cudaGetErrorString(e);
  for (const gpu::CopySeg& g : segs) {
    const uint64_t so = g.src - reinterpret_cast<uint64_t>(src_base);
    const uint64_t doff = g.dst - reinterpret_cast<uint64_t>(dst_base);
    std::memcpy(want.data() + doff, hs.data() + so, g.len);
  }
  const auto bad = std::mismatch(hd.begin(), hd.end(), want.begin());
  if (bad.first == hd.end()) return "";
  return "FAIL at destination byte " + std::to_string(bad.first - hd.begin());
}

}  // namespace

void MisalignProbe(Bench& b, const std::vector<uint32_t>& ls, const std::vector<uint32_t>& rs,
                   uint64_t n, uint64_t d) {
  // Each descriptor 16 bytes shorter than its slot, so that a destination moved
  // by up to 15 bytes stays inside its own slot.
  const uint64_t len = d - 16, span = 2 * n * d;
  KernelScratch k(n);
  double aligned = 0;
  struct Variant {
    uint64_t shift;
    bool byte_loop;
  };
  for (const Variant v : {Variant{0, false}, Variant{8, false}, Variant{4, false},
                          Variant{2, false}, Variant{1, false}, Variant{1, true}}) {
    std::vector<gpu::CopySeg> h(n);
    for (uint64_t i = 0; i < n; ++i)
      h[i] = {reinterpret_cast<uint64_t>(b.local) + ls[i] * d,
              reinterpret_cast<uint64_t>(b.ref_dst) + rs[i] * d + v.shift, len};
    cudaMemcpy(k.segs, h.data(), n * sizeof(gpu::CopySeg), cudaMemcpyHostToDevice);
    auto launch = [&](int it) {
      cudaError_t e =
          v.byte_loop ? LaunchByteLoopProbe(k.segs, static_cast<uint32_t>(n), b.stream)
                      : gpu::LaunchCopySegments(k.segs, 0, static_cast<uint32_t>(n), 1,
                                                static_cast<int>(n), {k.fin, k.done, uint64_t(it)},
                                                gpu::BlockFence::kSystem, b.stream);
      return e == cudaSuccess ? cudaStreamSynchronize(b.stream) : e;
    };
    cudaMemset(b.ref_dst, 0xab, span);
    cudaDeviceSynchronize();
    cudaError_t err = launch(0);
    const std::string bad =
        err == cudaSuccess ? CheckSpan(h, b.local, b.ref_dst, span, 0xab) : cudaGetErrorString(err);
    char name[112];
    std::snprintf(name, sizeof(name), "probe %s dst+%llu 6146x37424B GB/s (vs aligned)",
                  v.byte_loop ? "byte loop" : "kernel", static_cast<unsigned long long>(v.shift));
    std::printf("%s verify: %s\n", name, bad.empty() ? "PASS" : bad.c_str());
    (void)cudaGetLastError();
    if (!bad.empty()) continue;
    err = cudaSuccess;
    const std::vector<double> t = ProbeTimes(b, launch, &err);
    if (err != cudaSuccess || t.empty()) continue;
    const double rate = n * len / Pct(t, 50) / 1e3;
    if (v.shift == 0) aligned = rate;
    Row(name, rate, aligned, "GB/s");
  }
}

}  // namespace kvlane::test
