// Target side of netcut_test, run inside a network namespace by the test:
//   netcut_target LISTEN_HOST DIR
// Registers a 4 MiB pattern buffer, writes its metadata to DIR/meta and serves
// until DIR/stop appears (or its parent goes away, or 120 s pass).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "kvlane/kvlane.h"
#include "test_util.h"

int main(int argc, char** argv) {
  using namespace std::chrono_literals;
  if (argc != 3) {
    std::fprintf(stderr, "usage: netcut_target LISTEN_HOST DIR\n");
    return 2;
  }
  const std::filesystem::path dir = argv[2];
  kvlane::AgentOptions o;
  o.name = "target";
  o.transports = {"tcp"};
  o.tcp_listen_host = argv[1];
  auto agent = kvlane::Agent::Create(o);
  if (!agent.ok()) {
    std::fprintf(stderr, "netcut_target: %s\n", agent.status().ToString().c_str());
    return 1;
  }
  std::vector<uint8_t> buf(4 << 20);
  kvlane::test::Fill(buf, 77);
  if (!agent.value()->RegisterMemory(buf.data(), buf.size()).ok()) return 1;
  {
    std::ofstream f(dir / "meta.tmp", std::ios::binary);
    f << agent.value()->ExportMetadata().value();
  }
  std::filesystem::rename(dir / "meta.tmp", dir / "meta");
  const pid_t parent = getppid();
  for (auto t0 = std::chrono::steady_clock::now(); std::chrono::steady_clock::now() - t0 < 120s;) {
    if (std::filesystem::exists(dir / "stop") || getppid() != parent) break;
    std::this_thread::sleep_for(20ms);
  }
  return 0;
}
