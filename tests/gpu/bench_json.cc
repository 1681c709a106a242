#include "bench_json.h"

#include <cuda_runtime_api.h>

#include <cctype>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <sstream>

#include "kvlane/kvlane.h"
#include "kvlane/version.h"

namespace kvlane::test {
namespace {

// 13000 -> "13.0" (cudaDriverGetVersion / cudaRuntimeGetVersion encoding);
// 0 (no driver) -> "unknown".
std::string CudaVersion(int v) {
  if (v <= 0) return "unknown";
  return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}

// The kernel module's version ("570.86.15"): the first dotted number on the
// first line of /proc/driver/nvidia/version.
std::string NvidiaModuleVersion() {
  std::ifstream in("/proc/driver/nvidia/version");
  std::string line, word;
  std::getline(in, line);
  std::istringstream words(line);
  while (words >> word) {
    if (std::isdigit(static_cast<unsigned char>(word[0])) && word.find('.') != std::string::npos &&
        word.find_first_not_of("0123456789.") == std::string::npos)
      return word;
  }
  return "unknown";
}

nlohmann::json Gpus() {
  nlohmann::json gpus = nlohmann::json::array();
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
  for (int d = 0; d < n; ++d) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, d) != cudaSuccess) continue;
    char bus[32] = {};
    (void)cudaDeviceGetPCIBusId(bus, sizeof(bus), d);
    gpus.push_back({{"index", d},
                    {"name", p.name},
                    {"pci_bus_id", bus},
                    {"compute_capability", std::to_string(p.major) + "." + std::to_string(p.minor)},
                    {"memory_bytes", p.totalGlobalMem}});
  }
  (void)cudaGetLastError();
  return gpus;
}

}  // namespace

nlohmann::json BenchProvenance(const std::string& command) {
  int driver = 0, runtime = 0;
  (void)cudaDriverGetVersion(&driver);
  (void)cudaRuntimeGetVersion(&runtime);
  return {{"date_utc", UtcTimestamp()},
          {"hostname", HostName()},
          {"gpus", Gpus()},
          {"driver_version", NvidiaModuleVersion()},
          {"cuda_driver_api", CudaVersion(driver)},
          {"cuda_runtime", CudaVersion(runtime)},
          {"kvlane", VersionString()},
          {"kvlane_version", KVLANE_VERSION_STRING},
          {"kvlane_git", KVLANE_GIT_REVISION},
          {"command", command}};
}

bool WriteBenchJson(const std::string& path, const std::string& command, const nlohmann::json& run,
                    const std::vector<BenchRow>& rows) {
  nlohmann::json doc = {{"tool", "cuda_bench"},
                        {"provenance", BenchProvenance(command)},
                        {"run", run},
                        {"rows", nlohmann::json::array()}};
  for (const BenchRow& r : rows)
    doc["rows"].push_back({{"metric", r.metric},
                           {"kvlane", r.kvlane},
                           {"reference", r.reference},
                           {"unit", r.unit},
                           {"ratio", r.kvlane / r.reference}});
  std::ofstream out(path, std::ios::trunc);
  out << doc.dump(2) << "\n";
  out.close();
  if (out) return true;
  std::fprintf(stderr, "cuda_bench: cannot write %s\n", path.c_str());
  return false;
}

}  // namespace kvlane::test
