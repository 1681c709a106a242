// Charts for `kvbench summarize`: series picked from documents, written as a
// gnuplot data file and script, rendered to SVG by the gnuplot binary.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "kvlane/status.h"
#include "summarize.h"

namespace kvbench {

struct Series {
  std::string label;
  std::vector<std::pair<double, double>> points;  // (x, y), x ascending
};

struct ChartSpec {
  std::string name;  // file stem: name.dat, name.gp, name.svg
  std::string title;
  std::string xlabel;
  std::string ylabel;
  bool log2_x = true;
  std::vector<Series> series;
};

// Both charts draw verified rows only (a failed row has no timing to draw).
// GB/s p50 against batch at each case's largest ISL, one line per op and transport.
ChartSpec FrontierChart(const std::vector<LoadedDocument>& docs);
// Burst p50 latency against ISL at each case's smallest batch, one line per op and transport.
ChartSpec LatencyChart(const std::vector<LoadedDocument>& docs);

// Writes name.dat and name.gp under dir and runs gnuplot. kNotFound (with the
// reason) when gnuplot is not on PATH; the .dat and .gp are written regardless.
// A name.svg already in dir is removed first: after a failure there is none.
kvlane::Status RenderChart(const ChartSpec& chart, const std::string& dir);

// The first executable called `name` on PATH, or empty.
std::string FindOnPath(const std::string& name);

}  // namespace kvbench
