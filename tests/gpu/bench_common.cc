#include "bench_common.h"

#include <algorithm>
#include <numeric>
#include <random>
#include <string>

namespace kvlane::test {

std::vector<BenchRow>& Rows() {
  static std::vector<BenchRow> rows;
  return rows;
}

void Row(const char* name, double kv, double ref, const char* unit) {
  Rows().push_back({name, kv, ref, unit});
  std::printf("| %-44s | %10.2f | %10.2f | %-5s | %6.3f |\n", name, kv, ref, unit, kv / ref);
}

void Header() {
  std::printf("| %-44s | %10s | %10s | %-5s | %6s |\n", "metric", "kvlane", "reference", "unit",
              "ratio");
  std::printf("|%s|%s|%s|%s|%s|\n", std::string(46, '-').c_str(), std::string(12, '-').c_str(),
              std::string(12, '-').c_str(), std::string(7, '-').c_str(),
              std::string(8, '-').c_str());
}

std::vector<double> ProbeTimes(Bench& b, const std::function<cudaError_t(int)>& run,
                               cudaError_t* err) {
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

void ProbeRow(Bench& b, const char* name, uint64_t bytes, const std::vector<double>& t, bool write,
              int ref_warm, int ref_n) {
  const double ref = Pct(b.RefTimes(write, bytes, ref_warm, ref_n), 50);
  Row(name, bytes / Pct(t, 50) / 1e3, bytes / ref / 1e3, "GB/s");
}

void ShuffledSlots(uint64_t n, std::vector<uint32_t>* ls, std::vector<uint32_t>* rs) {
  ls->resize(2 * n);
  rs->resize(2 * n);
  std::iota(ls->begin(), ls->end(), 0);
  std::iota(rs->begin(), rs->end(), 0);
  std::mt19937 rng(1);
  std::shuffle(ls->begin(), ls->end(), rng);
  std::shuffle(rs->begin(), rs->end(), rng);
}

}  // namespace kvlane::test
