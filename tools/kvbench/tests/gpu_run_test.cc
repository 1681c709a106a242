// kvbench on device pools over tcp (CTest label `gpu`; scripts/gpu-check.sh): two
// real rank processes share GPU 0, the engine stages every byte through pinned
// host buffers on both sides, every row is verified on the GPU, and the document
// says which memory moved and how. Then a device pool on one rank and a host pool
// on the other (--memory cuda,host and host,cuda): staged on the device side only.
// Ranks that disagree on the pool memory stop before allocating. Fails (does not skip) without a
// GPU. Runs the kvbench binary named by $KVBENCH_BINARY, else the one beside this test (a gpu-bin
// copy), else the one built with it.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <ostream>
#include <string>

#include "device_memory.h"
#include "kvbench_process.h"
#include "reference.h"
#include "self_pair.h"
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
  for (const char* role : {"target", "initiator"}) {
    EXPECT_EQ(impl["per_rank"][role]["memory"], "cuda") << role;
    EXPECT_EQ(impl["per_rank"][role]["staging"], "pinned-host") << role;
    EXPECT_EQ(impl["per_rank"][role]["device"], 0) << role;
  }
  EXPECT_EQ(doc["identity"]["case"], "kv-dsv4-b256-tcp-cuda-isl8k-b1_2");
  for (const auto& row : doc["rows"]) {
    EXPECT_EQ(row["reference"]["method"], "socket-staged") << row["op"];
    EXPECT_GT(row["reference"]["gbps_p50"].get<double>(), 0) << row["op"];
  }
  for (const auto& rank : doc["topology"]["ranks"]) {  // both ranks on GPU 0
    ASSERT_EQ(rank["devices"].size(), 1u);
    EXPECT_EQ(rank["devices"][0].get<std::string>().rfind("cuda:0 ", 0), 0u) << rank.dump();
  }
}

// One rank's pool on GPU 0, the other's in host memory (--memory TARGET,INITIATOR):
// cuda,host is the GPU-to-host offload (pull lands the target's device bytes in the
// initiator's host pool), host,cuda the host-to-GPU reload. tcp stages through
// pinned host buffers on the device side only, and so does the socket reference.
struct MixedPair {
  const char* memory;  // --memory
  const char* device_role;
  const char* host_role;
  const char* method;  // the socket reference's
};

void PrintTo(const MixedPair& m, std::ostream* os) { *os << m.memory; }

class GpuMixedRun : public GpuRun, public ::testing::WithParamInterface<MixedPair> {};

TEST_P(GpuMixedRun, TcpMovesBetweenAHostPoolAndADevicePool) {
  const MixedPair& m = GetParam();
  Dirs FreshDir;
  fs::path out = FreshDir(std::string("tcp_mixed_") + m.device_role);
  ASSERT_EQ(testing::RunBinary(KvbenchBinary(),
                               std::string("run --transport tcp --memory ") + m.memory +
                                   " --device 0 --isl 8192 --batches 1,2 --warmup 1 --samples 3 "
                                   "--trials 1 --pool-budget 1GiB --control-timeout 60s --out " +
                                   out.string()),
            0);
  nlohmann::json doc = testing::OnlyDocument(out);
  testing::ExpectValid(doc, "tcp", 4);  // 2 batches x pull, push; every row verified
  EXPECT_EQ(doc["version"], 4);
  const nlohmann::json& impl = doc["implementation"];
  EXPECT_EQ(impl["memory"], m.memory);
  EXPECT_EQ(impl["memory_declared"], m.memory);
  EXPECT_EQ(impl["staging"], "pinned-host");
  EXPECT_EQ(impl["per_rank"][m.device_role]["memory"], "cuda");
  EXPECT_EQ(impl["per_rank"][m.device_role]["staging"], "pinned-host");
  EXPECT_EQ(impl["per_rank"][m.device_role]["device"], 0);
  EXPECT_EQ(impl["per_rank"][m.host_role]["memory"], "host");
  EXPECT_EQ(impl["per_rank"][m.host_role]["staging"], "none");
  EXPECT_FALSE(impl["per_rank"][m.host_role].contains("device"));
  std::string label = m.memory;
  label[label.find(',')] = '-';
  EXPECT_EQ(doc["identity"]["case"], "kv-dsv4-b256-tcp-" + label + "-isl8k-b1_2");
  for (const auto& row : doc["rows"]) {
    EXPECT_EQ(row["reference"]["method"], m.method) << row["op"];
    EXPECT_GT(row["reference"]["gbps_p50"].get<double>(), 0) << row["op"];
  }
  for (const auto& rank : doc["topology"]["ranks"]) {
    ASSERT_EQ(rank["devices"].size(), 1u);
    const std::string device = rank["devices"][0].get<std::string>();
    if (rank["role"] == m.device_role) {
      EXPECT_EQ(device.rfind("cuda:0 ", 0), 0u) << rank.dump();
    } else {
      EXPECT_EQ(device, "host") << rank.dump();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Pairs, GpuMixedRun,
    ::testing::Values(MixedPair{"cuda,host", "target", "initiator", "socket-staged-target"},
                      MixedPair{"host,cuda", "initiator", "target", "socket-staged-initiator"}),
    [](const auto& info) {
      std::string name = info.param.memory;
      name[name.find(',')] = '_';
      return name;
    });

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

// The in-process device reference of a pair of one extent with itself (contig at
// batch 1) copies a range onto itself with cudaMemcpy. The host reference had to
// go through a scratch buffer (a memmove onto itself returns at once); this checks
// that the device copy still moves the bytes, so the reference times a real copy:
// 256 MiB within the ~10 us of a cudaMemcpy call would read as tens of TB/s, while
// H200 memory copies about 2 TB/s (it did copy on driver 580, session 24).
TEST_F(GpuRun, DeviceReferenceCopiesASelfPairForReal) {
  constexpr uint64_t kExtent = 256ull << 20;
  auto pool = DeviceAlloc(0, kExtent);
  ASSERT_TRUE(pool.ok()) << pool.status().ToString();
  auto* p = static_cast<uint8_t*>(pool.value());
  ASSERT_TRUE(DeviceMemset(p, 0x5a, kExtent).ok());
  const testing::SelfPair self = testing::OneExtentPairedWithItself(kExtent);
  for (kvlane::Op op : {kvlane::Op::kRead, kvlane::Op::kWrite}) {
    const auto r = DeviceCopyReference(p, self.list, self.map, op, 3);
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->method, "cudaMemcpy");
    EXPECT_GT(r->p50_ms, 0.0);
    EXPECT_LT(r->gbps_p50, 4000.0) << "the reference copied nothing";
  }
  uint8_t mid = 0;
  ASSERT_TRUE(CopyFromDevice(&mid, p + kExtent / 2, 1).ok());
  EXPECT_EQ(mid, 0x5a);  // the pool's bytes stay as they were
  DeviceFree(p);
}

}  // namespace
}  // namespace kvbench
