// Running the kvbench binary from a test: fresh output directories, the exit
// code of one command line, and the one document a run wrote. Header-only; used
// by the end-to-end tests (CPU) and the device-pool run test (gpu).
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "loopback_address.h"

namespace kvbench::testing {

namespace fs = std::filesystem;

// A fresh path under the temp directory; every one is removed when this object goes.
class Dirs {
 public:
  ~Dirs() {
    for (const fs::path& p : made_) fs::remove_all(p);
  }
  fs::path operator()(const std::string& name) {
    fs::path p = fs::temp_directory_path() / ("kvbench_e2e_" + name + std::to_string(getpid()));
    fs::remove_all(p);
    made_.push_back(p);
    return p;
  }

 private:
  std::vector<fs::path> made_;
};

// The whole of a (small) file: what a command wrote to its redirected stderr.
inline std::string ReadFile(const fs::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// "127.A.B.C:PORT" for hand-started ranks' --peer: a loopback address of this
// process's own (A.B.C are its pid's low 24 bits; Linux routes all of 127/8 to
// the loopback device) and a port nobody had bound on it when asked. Rank 0
// binds it later: another test, running beside this one, has another address,
// so it can neither take the port in between nor have its rank 1 connect here;
// only a process binding the port on every address could come between.
inline std::string FreeLoopbackPeer() {
  const uint32_t host = (uint32_t{127} << 24) | (static_cast<uint32_t>(getpid()) & 0xffffff);
  const sockaddr_in a = LoopbackAddress(0, host);
  char name[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &a.sin_addr, name, sizeof(name));
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const uint16_t port = fd >= 0 ? BindLoopback(fd, host) : 0;
  EXPECT_NE(port, 0) << "binding a port on " << name << ": " << std::strerror(errno);
  if (fd >= 0) close(fd);
  return std::string(name) + ":" + std::to_string(port);
}

// Runs `binary args` through the shell; its exit code, -1 when it did not exit.
inline int RunBinary(const std::string& binary, const std::string& args) {
  std::string cmd = binary + " " + args;
  int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// The one JSON document in `dir` (a failure when there is not exactly one).
inline nlohmann::json OnlyDocument(const fs::path& dir) {
  std::vector<fs::path> docs;
  for (const auto& e : fs::directory_iterator(dir)) docs.push_back(e.path());
  EXPECT_EQ(docs.size(), 1u);
  if (docs.empty()) return {};
  std::ifstream in(docs[0]);
  return nlohmann::json::parse(in);
}

// A valid run over `transport` with `rows` rows, every row verified and timed.
inline void ExpectValid(const nlohmann::json& doc, const std::string& transport, size_t rows) {
  EXPECT_TRUE(doc["version"].is_number_integer());
  EXPECT_EQ(doc["outcome"]["valid"], true) << doc["outcome"].dump();
  EXPECT_EQ(doc["complete"], true);  // every planned row measured
  EXPECT_EQ(doc["rows_missing"], nlohmann::json::array());
  EXPECT_FALSE(doc.contains("stopped_by"));
  EXPECT_FALSE(doc.contains("running"));  // the final write replaced every checkpoint
  EXPECT_EQ(doc["implementation"]["transport"], transport);
  ASSERT_EQ(doc["rows"].size(), rows);
  for (const auto& row : doc["rows"]) {
    EXPECT_EQ(row["verified"], "pass") << row.dump();
    EXPECT_GT(row["gbps_p50"].get<double>(), 0);
    // Every measured burst's per-request offsets, one array per sample.
    ASSERT_EQ(row["request_ms"].size(), row["burst_ms"]["n"].get<size_t>());
    for (const auto& sample : row["request_ms"]) {
      EXPECT_EQ(sample.size(), row["batch"].get<size_t>());
    }
    const auto& p50 = row["request_ms"][row["p50_sample"].get<size_t>()];
    EXPECT_LE(*std::max_element(p50.begin(), p50.end()),
              row["burst_ms"]["p50"].get<double>() + 0.001);
  }
  EXPECT_EQ(doc["topology"]["ranks"].size(), 2u);
}

}  // namespace kvbench::testing
