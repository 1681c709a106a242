// kvbench on device pools over tcp (CTest label `gpu`; scripts/gpu-check.sh): two
// real rank processes share GPU 0, the engine stages every byte through pinned
// host buffers on both sides, every row is verified on the GPU, and the document
// says which memory moved and how. Ranks that disagree on the pool memory stop
// before allocating. Fails (does not skip) without a GPU. Runs the kvbench binary
// named by $KVBENCH_BINARY, else the one beside this test (a gpu-bin copy), else
// the one built with it.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "device_memory.h"
#include "kvbench_process.h"
#include "session_pair.h"

namespace kvbench {
namespace {

namespace fs = std::filesystem;
using testing::Dirs;

std::string KvbenchBinary() {
  if (const char* env = std::getenv("KVBENCH_BINARY")) return env;
  fs::path beside = fs::read_symlink("/proc/self/exe").parent_path() / "kvbench";
  return fs::exists(beside) ? beside.string() : std::string(KVBENCH_BINARY);
}

class GpuRun : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_GT(DeviceCount(), 0) << "a gpu-labelled test: run it where a GPU is visible";
  }
};

TEST_F(GpuRun, TcpMovesDevicePoolsStagedThroughPinnedHost) {
  Dirs FreshDir;
  fs::path out = FreshDir("tcp_cuda");
  ASSERT_EQ(testing::RunBinary(
                KvbenchBinary(),
                "run --transport tcp --memory cuda --device 0 --isl 8192 --batches 1,2 "
                "--warmup 1 --samples 3 --trials 1 --pool-budget 1GiB --control-timeout 60s "
                "--out " +
                    out.string()),
            0);
  nlohmann::json doc = testing::OnlyDocument(out);
  testing::ExpectValid(doc, "tcp", 4);  // 2 batches x pull, push; every row verified
  const nlohmann::json& impl = doc["implementation"];
  EXPECT_EQ(impl["memory"], "cuda");
  EXPECT_EQ(impl["memory_declared"], "cuda");
  EXPECT_EQ(impl["staging"], "pinned-host");
  EXPECT_EQ(impl["pool"]["memory"], "cuda");
  EXPECT_EQ(doc["identity"]["case"], "kv-dsv4-b256-tcp-cuda");
  for (const auto& row : doc["rows"]) {
    EXPECT_EQ(row["reference"]["method"], "socket-staged") << row["op"];
    EXPECT_GT(row["reference"]["gbps_p50"].get<double>(), 0) << row["op"];
  }
  for (const auto& rank : doc["topology"]["ranks"]) {  // both ranks on GPU 0
    ASSERT_EQ(rank["devices"].size(), 1u);
    EXPECT_EQ(rank["devices"][0].get<std::string>().rfind("cuda:0 ", 0), 0u) << rank.dump();
  }
}

TEST_F(GpuRun, RanksOnDifferentMemoryStopBeforeAnyPool) {
  testing::SessionPair p =
      testing::OpenBoth({"--transport", "tcp", "--memory", "host"},
                        {"--transport", "tcp", "--memory", "cuda", "--device", "0"});
  for (const auto* side : {&p.target, &p.initiator}) {
    ASSERT_FALSE(side->ok());
    EXPECT_EQ(side->status().code(), kvlane::Code::kInvalidArgument);
    EXPECT_NE(side->status().message().find("disagree on the data path"), std::string::npos)
        << side->status().message();
  }
}

}  // namespace
}  // namespace kvbench
