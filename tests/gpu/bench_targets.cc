#include "bench_targets.h"

#include <cstdio>
#include <optional>

namespace kvlane::test {
namespace {

std::optional<BenchRow> Find(const std::vector<BenchRow>& rows, const std::string& metric) {
  for (const BenchRow& r : rows) {
    if (r.metric == metric) return r;
  }
  return std::nullopt;
}

std::string Fmt(const char* f, double a, double b = 0) {
  char s[160];
  std::snprintf(s, sizeof(s), f, a, b);
  return s;
}

// kvlane / reference of row `metric` against `bound`: at least it (`at_least`)
// or at most it.
TargetVerdict Ratio(const std::vector<BenchRow>& rows, const std::string& target,
                    const std::string& metric, double bound, bool at_least) {
  TargetVerdict v{target, "", false, false};
  auto r = Find(rows, metric);
  if (!r || r->reference <= 0) {
    v.missing = true;
    v.measured = "not measured (" + metric + ")";
    return v;
  }
  const double ratio = r->kvlane / r->reference;
  v.met = at_least ? ratio >= bound : ratio <= bound;
  v.measured =
      Fmt("%.3f x (%.2f", ratio, r->kvlane) + Fmt(" vs %.2f ", r->reference) + r->unit + ")";
  return v;
}

// kvlane's figure of row `metric` at most `bound` (in the row's unit).
TargetVerdict AtMost(const std::vector<BenchRow>& rows, const std::string& target,
                     const std::string& metric, double bound) {
  TargetVerdict v{target, "", false, false};
  auto r = Find(rows, metric);
  if (!r) {
    v.missing = true;
    v.measured = "not measured (" + metric + ")";
    return v;
  }
  v.met = r->kvlane <= bound;
  v.measured = Fmt("%.2f ", r->kvlane) + r->unit;
  return v;
}

}  // namespace

std::vector<TargetVerdict> CheckTargets(const std::vector<BenchRow>& rows) {
  std::vector<TargetVerdict> v;
  for (const char* size : {"256MiB", "1GiB"}) {
    for (const char* op : {"write", "read"}) {
      for (const char* lanes : {"one-lane", "striped"}) {
        const std::string m = std::string(size) + " " + op + " " + lanes + " GB/s";
        v.push_back(Ratio(rows, m + " >= 0.98 x reference", m, 0.98, true));
      }
    }
  }
  for (const char* op : {"write", "read"}) {
    v.push_back(AtMost(rows, std::string("4KiB ") + op + " p50 <= 4 us",
                       std::string("4KiB ") + op + " p50 us", 4.0));
    v.push_back(AtMost(rows, std::string("4KiB ") + op + " p99 <= 5 us",
                       std::string("4KiB ") + op + " p99 us", 5.0));
  }
  v.push_back(AtMost(rows, "4KiB WRITE beside 2MiB p99 <= 5 us",
                     "4KiB WRITE beside 2MiB: p99 us (vs solo p99)", 5.0));
  v.push_back(Ratio(rows, "2MiB bulk lane beside 4KiB >= 0.95 x solo",
                    "2MiB bulk lane GB/s beside 4KiB (vs solo)", 0.95, true));
  for (const char* op : {"write", "read"}) {
    for (const char* p : {"p50", "p99"}) {
      const std::string t = std::string("2MiB ") + op + " " + p;
      v.push_back(Ratio(rows, t + " <= 1.05 x reference", t + " us", 1.05, false));
    }
  }
  for (const char* op : {"write", "read"}) {
    const std::string m = std::string("6146x37440B ") + op + " GB/s (vs kvlane contig)";
    TargetVerdict s =
        Ratio(rows, std::string("6146x37440B ") + op + " >= 0.95 x contiguous", m, 0.95, true);
    if (auto ns = Find(rows, std::string("6146x37440B ") + op + " ns/desc (vs ref contig)"))
      s.measured += Fmt("; %.1f ns/desc", ns->kvlane);
    v.push_back(std::move(s));
  }
  return v;
}

int PrintTargets(const std::vector<TargetVerdict>& verdicts, int gpus) {
  int unmet = 0, missing = 0;
  std::printf("\nissue #6 targets (%s)\n", gpus >= 2 ? "two GPUs: these count"
                                                     : "set for two GPUs; one GPU here: "
                                                       "informational");
  std::printf("| %-46s | %-56s | %-7s |\n", "target", "measured", "verdict");
  for (const TargetVerdict& v : verdicts) {
    const char* verdict = v.missing ? "n/a" : v.met ? "met" : "NOT MET";
    unmet += !v.missing && !v.met;
    missing += v.missing;
    std::printf("| %-46s | %-56s | %-7s |\n", v.target.c_str(), v.measured.c_str(), verdict);
  }
  std::printf("targets not met: %d of %zu (%d not measured in this run)\n", unmet, verdicts.size(),
              missing);
  return unmet;
}

}  // namespace kvlane::test
