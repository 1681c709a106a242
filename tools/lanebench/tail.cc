#include "tail.h"

#include "run_result.h"
#include "stats.h"

namespace lanebench {
namespace {

struct Counts {  // pooled over runs: pairs x iters reaches 10^12, past int's range
  int64_t measured = 0, slow = 0, stalled = 0, slow_post = 0, other = 0;
};

void CountRun(const std::string& shape, const nlohmann::json& result, Counts* c) {
  const char* x = WatchedXfer(shape);
  const std::vector<double> lat = RunSeries(result, "lat_us", x);
  const std::vector<double> post = RunSeries(result, "post_us", x);
  const std::vector<double> stall = RunSeries(result, "stall_us", x);
  if (lat.empty() || post.size() != lat.size() || stall.size() != lat.size()) return;
  const double median = Median(lat);
  c->measured += static_cast<int64_t>(lat.size());
  for (size_t i = 0; i < lat.size(); ++i) {
    if (lat[i] <= kSlowFactor * median) continue;
    ++c->slow;
    if (stall[i] >= kStallUs)
      ++c->stalled;
    else if (post[i] >= kStallUs)
      ++c->slow_post;
    else
      ++c->other;
  }
}

// The watched transfer's latencies of `result` in iterations whose poller did not
// stall, appended to `*kept`; none when the series do not line up.
void KeepUnstalled(const std::string& shape, const nlohmann::json& result,
                   std::vector<double>* kept) {
  const char* x = WatchedXfer(shape);
  const std::vector<double> lat = RunSeries(result, "lat_us", x);
  const std::vector<double> stall = RunSeries(result, "stall_us", x);
  if (stall.size() != lat.size()) return;
  for (size_t i = 0; i < lat.size(); ++i)
    if (stall[i] < kStallUs) kept->push_back(lat[i]);
}

}  // namespace

const char* WatchedXfer(const std::string& shape) { return shape == "mixed" ? "small" : "xfer"; }

double UnstalledP99(const std::string& shape, const nlohmann::json& result) {
  std::vector<double> kept;
  KeepUnstalled(shape, result, &kept);
  return Percentile(kept, 99);
}

nlohmann::ordered_json TailDoc(const Case& c, const std::string& arm,
                               const std::vector<RunRecord>& records) {
  Counts n;
  std::vector<double> unstalled, pooled_unstalled, per_s_5, per_s_10, lost_pct;
  for (const RunRecord& r : records) {
    if (r.case_id != c.id || r.arm != arm || !RunValid(r.result)) continue;
    CountRun(c.shape, r.result, &n);
    unstalled.push_back(UnstalledP99(c.shape, r.result));
    KeepUnstalled(c.shape, r.result, &pooled_unstalled);
    if (!r.result.contains("host_stalls")) continue;
    const nlohmann::json& h = r.result["host_stalls"];
    const double s = h.value("spin_ms", 0.0) / 1e3;
    if (s <= 0) continue;
    per_s_5.push_back(h.value("over_5us", 0.0) / s);
    per_s_10.push_back(h.value("over_10us", 0.0) / s);
    lost_pct.push_back(h.value("stalled_pct", 0.0));
  }
  return {{"watched", WatchedXfer(c.shape)},
          {"measured", n.measured},
          {"slow", n.slow},
          {"slow_stalled", n.stalled},
          {"slow_post", n.slow_post},
          {"slow_other", n.other},
          {"p99_unstalled_us", Percentile(pooled_unstalled, 99)},
          {"p99_unstalled_runs", unstalled},
          {"host_stalls_5us_per_s", Median(per_s_5)},
          {"host_stalls_10us_per_s", Median(per_s_10)},
          {"host_stalled_pct", Median(lost_pct)}};
}

}  // namespace lanebench
