#include "summary_charts.h"

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

extern char** environ;

namespace kvbench {
namespace {

namespace fs = std::filesystem;

// Only a verified row has timings: a failed one carries zeros (or the time of a
// burst that did not complete), which a chart would draw as a measurement.
bool Charted(const RowResult& r) { return r.verdict == Verdict::kPass; }

std::set<std::string> Ops(const LoadedDocument& d) {
  std::set<std::string> ops;
  for (const RowResult& r : d.rows) {
    if (Charted(r)) ops.insert(r.op);
  }
  return ops;
}

// Rows of `op` in d, keyed by (x = key(row)) where keep(row) holds.
template <typename Keep, typename X, typename Y>
Series Pick(const LoadedDocument& d, const std::string& op, std::string label, Keep keep, X x,
            Y y) {
  std::map<double, double> points;
  for (const RowResult& r : d.rows) {
    if (r.op == op && Charted(r) && keep(r)) points[x(r)] = y(r);
  }
  return {std::move(label), {points.begin(), points.end()}};
}

void WriteData(const ChartSpec& c, const fs::path& path) {
  std::ofstream out(path);
  for (const Series& s : c.series) {
    fmt::print(out, "# {}\n", s.label);
    for (const auto& [x, y] : s.points) fmt::print(out, "{} {}\n", x, y);
    out << "\n\n";
  }
}

// One value on an axis (a grid of one ISL, or one batch) is a range gnuplot calls
// empty and widens with a warning on the terminal: sets a range around it instead.
void WriteRanges(const ChartSpec& c, std::ostream& out) {
  double x_lo = 0, x_hi = 0, y_lo = 0, y_hi = 0;
  bool any = false;
  for (const Series& s : c.series) {
    for (const auto& [x, y] : s.points) {
      x_lo = any ? std::min(x_lo, x) : x;
      x_hi = any ? std::max(x_hi, x) : x;
      y_lo = any ? std::min(y_lo, y) : y;
      y_hi = any ? std::max(y_hi, y) : y;
      any = true;
    }
  }
  if (!any) return;
  if (x_lo == x_hi && c.log2_x && x_lo > 0) {
    fmt::print(out, "set xrange [{}:{}]\n", x_lo / 2, x_lo * 2);
  } else if (x_lo == x_hi) {
    fmt::print(out, "set xrange [{}:{}]\n", x_lo - 1, x_lo + 1);
  }
  if (y_lo == y_hi) {
    const double pad = y_lo != 0 ? std::abs(y_lo) / 2 : 1;
    fmt::print(out, "set yrange [{}:{}]\n", y_lo - pad, y_lo + pad);
  }
}

// `text` inside a gnuplot single-quoted string (a quote is doubled).
std::string Quoted(const std::string& text) {
  std::string out;
  for (char ch : text) out += ch == '\'' ? std::string("''") : std::string(1, ch);
  return out;
}

void WriteScript(const ChartSpec& c, const fs::path& dir) {
  std::ofstream out(dir / (c.name + ".gp"));
  fmt::print(out, "set terminal svg size 900,560 dynamic enhanced background rgb 'white'\n");
  fmt::print(out, "set output '{}.svg'\nset title '{}' noenhanced\n", c.name, Quoted(c.title));
  fmt::print(out, "set xlabel '{}'\nset ylabel '{}'\nset grid\nset key outside right\n", c.xlabel,
             c.ylabel);
  if (c.log2_x) out << "set logscale x 2\n";
  WriteRanges(c, out);
  out << "plot ";
  for (size_t i = 0; i < c.series.size(); ++i) {
    fmt::print(out, "{}'{}.dat' index {} using 1:2 with linespoints title '{}' noenhanced",
               i ? ", \\\n     " : "", c.name, i, Quoted(c.series[i].label));
  }
  out << "\n";
}

int RunGnuplot(const fs::path& dir, const std::string& script) {
  pid_t pid;
  std::string gp = FindOnPath("gnuplot");
  std::string path = (dir / script).string();
  char* argv[] = {gp.data(), path.data(), nullptr};
  // gnuplot writes '<name>.svg' relative to its working directory: run it in dir.
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addchdir_np(&fa, dir.c_str());
  int rc = posix_spawn(&pid, gp.c_str(), &fa, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return -1;
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

ChartSpec FrontierChart(const std::vector<LoadedDocument>& docs) {
  ChartSpec c{"frontier",
              "GB/s p50 vs batch at the largest ISL",
              "batch (requests per burst)",
              "GB/s p50 (decimal)",
              true,
              {}};
  for (const LoadedDocument& d : docs) {
    for (const std::string& op : Ops(d)) {
      uint64_t isl = 0;
      for (const RowResult& r : d.rows) isl = r.op == op && Charted(r) ? std::max(isl, r.isl) : isl;
      c.series.push_back(Pick(
          d, op, fmt::format("{} {} isl {}", op, d.series, isl),
          [&](const RowResult& r) { return r.isl == isl; },
          [](const RowResult& r) { return double(r.batch); },
          [](const RowResult& r) { return r.gbps_p50; }));
    }
  }
  return c;
}

ChartSpec LatencyChart(const std::vector<LoadedDocument>& docs) {
  ChartSpec c{"latency_vs_isl",
              "burst p50 latency vs ISL at the smallest batch",
              "ISL (tokens per request)",
              "burst p50 (ms)",
              true,
              {}};
  for (const LoadedDocument& d : docs) {
    for (const std::string& op : Ops(d)) {
      uint64_t batch = UINT64_MAX;
      for (const RowResult& r : d.rows) {
        batch = r.op == op && Charted(r) ? std::min(batch, r.batch) : batch;
      }
      c.series.push_back(Pick(
          d, op, fmt::format("{} {} batch {}", op, d.series, batch),
          [&](const RowResult& r) { return r.batch == batch; },
          [](const RowResult& r) { return double(r.isl); },
          [](const RowResult& r) { return r.burst_ms.p50; }));
    }
  }
  return c;
}

std::string FindOnPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  for (size_t at = 0; at <= dirs.size();) {
    size_t end = dirs.find(':', at);
    if (end == std::string::npos) end = dirs.size();
    fs::path candidate = fs::path(dirs.substr(at, end - at)) / name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    at = end + 1;
  }
  return "";
}

kvlane::Status RenderChart(const ChartSpec& chart, const std::string& dir) {
  fs::path d(dir);
  // An earlier summary's chart would otherwise stay beside this one's summary.md,
  // drawn from other documents, whenever this render fails.
  std::error_code ec;
  fs::remove(d / (chart.name + ".svg"), ec);
  WriteData(chart, d / (chart.name + ".dat"));
  WriteScript(chart, d);
  if (chart.series.empty()) return kvlane::Status::NotFound("no data for chart " + chart.name);
  if (FindOnPath("gnuplot").empty()) {
    return kvlane::Status::NotFound("gnuplot not found on PATH: wrote " + chart.name +
                                    ".dat and .gp but no .svg (install gnuplot-nox)");
  }
  int rc = RunGnuplot(fs::absolute(d), chart.name + ".gp");
  if (rc != 0 || !fs::exists(d / (chart.name + ".svg"))) {
    return kvlane::Status::Backend(
        fmt::format("gnuplot failed on {}.gp (exit {})", chart.name, rc));
  }
  return kvlane::Status::Ok();
}

}  // namespace kvbench
