#include "path_choice.h"

#include <gtest/gtest.h>

namespace kvbench {
namespace {

using kvlane::Code;
using kvlane::MemoryKind;

DataPath Resolve(const std::string& transport, const std::string& memory, bool same_host,
                 int gpus) {
  auto path = ResolveDataPath(transport, memory, same_host, gpus);
  EXPECT_TRUE(path.ok()) << transport << "/" << memory << ": " << path.status().message();
  return path.ok() ? path.value() : DataPath{};
}

Code CodeOf(const std::string& transport, const std::string& memory, bool same_host, int gpus) {
  return ResolveDataPath(transport, memory, same_host, gpus).status().code();
}

TEST(PathChoice, AutoMemoryIsDeviceForCudaOnlyAsBefore) {
  EXPECT_EQ(Resolve("auto", "auto", false, 8).transport, "tcp");
  EXPECT_EQ(Resolve("auto", "auto", false, 8).memory, MemoryKind::kHost);
  EXPECT_EQ(Resolve("auto", "auto", true, 0).transport, "shm");
  EXPECT_EQ(Resolve("auto", "auto", true, 1).transport, "shm");  // one GPU: no cuda pair
  EXPECT_EQ(Resolve("auto", "auto", true, 2).transport, "cuda");
  EXPECT_EQ(Resolve("auto", "auto", true, 2).memory, MemoryKind::kCuda);
  EXPECT_EQ(Resolve("tcp", "auto", true, 2).memory, MemoryKind::kHost);
  EXPECT_EQ(Resolve("cuda", "auto", true, 1).memory, MemoryKind::kCuda);
}

TEST(PathChoice, DeviceMemoryOverTcpIsStagedThroughPinnedHost) {
  DataPath path = Resolve("tcp", "cuda", false, 1);
  EXPECT_EQ(path.transport, "tcp");
  EXPECT_EQ(path.memory, MemoryKind::kCuda);
  EXPECT_EQ(StagingName(path), "pinned-host");
  EXPECT_EQ(Resolve("auto", "cuda", false, 8).transport, "tcp");  // across hosts
  EXPECT_EQ(Resolve("tcp", "cuda", true, 1).transport, "tcp");    // loopback, one GPU
  EXPECT_EQ(StagingName(Resolve("cuda", "cuda", true, 2)), "none");
  EXPECT_EQ(StagingName(Resolve("tcp", "host", false, 0)), "none");
}

TEST(PathChoice, ExplicitMemorySteersAutoOnOneHost) {
  EXPECT_EQ(Resolve("auto", "cuda", true, 1).transport, "cuda");  // shm cannot reach it
  EXPECT_EQ(Resolve("auto", "host", true, 2).transport, "shm");   // cuda cannot move it
  EXPECT_EQ(Resolve("auto", "host", true, 2).memory, MemoryKind::kHost);
}

TEST(PathChoice, RefusesPairsNoMachineCanRun) {
  EXPECT_EQ(CheckTransportMemory("shm", "cuda").code(), Code::kInvalidArgument);
  EXPECT_EQ(CheckTransportMemory("local", "cuda").code(), Code::kInvalidArgument);
  EXPECT_EQ(CheckTransportMemory("cuda", "host").code(), Code::kInvalidArgument);
  EXPECT_EQ(CheckTransportMemory("tcp", "gpu").code(), Code::kInvalidArgument);
  EXPECT_NE(CheckTransportMemory("shm", "cuda").message().find("host memory only"),
            std::string::npos);
  EXPECT_NE(CheckTransportMemory("cuda", "host").message().find("pageable"), std::string::npos);
  for (const char* transport : {"auto", "local", "shm", "tcp", "cuda"}) {
    EXPECT_TRUE(CheckTransportMemory(transport, "auto").ok()) << transport;
  }
  EXPECT_TRUE(CheckTransportMemory("tcp", "cuda").ok());
  EXPECT_TRUE(CheckTransportMemory("auto", "cuda").ok());
  EXPECT_TRUE(CheckTransportMemory("auto", "host").ok());
  // The pair is refused before the GPUs are counted.
  EXPECT_EQ(CodeOf("shm", "cuda", true, 0), Code::kInvalidArgument);
  EXPECT_EQ(CodeOf("shm", "cuda", true, 2), Code::kInvalidArgument);
}

TEST(PathChoice, DevicePoolWithoutAGpuIsNotSupported) {
  EXPECT_EQ(CodeOf("tcp", "cuda", false, 0), Code::kNotSupported);
  EXPECT_EQ(CodeOf("auto", "cuda", false, 0), Code::kNotSupported);
  EXPECT_EQ(CodeOf("auto", "cuda", true, 0), Code::kNotSupported);
  EXPECT_EQ(CodeOf("cuda", "auto", true, 0), Code::kNotSupported);
  auto s = ResolveDataPath("tcp", "cuda", false, 0).status();
  EXPECT_NE(s.message().find("--memory cuda"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("no CUDA device"), std::string::npos) << s.message();
}

TEST(PathChoice, OneHostTransportsAcrossHostsAreRefused) {
  EXPECT_EQ(CodeOf("shm", "auto", false, 0), Code::kInvalidArgument);
  EXPECT_EQ(CodeOf("cuda", "cuda", false, 2), Code::kInvalidArgument);
}

TEST(PathChoice, DefaultDeviceOnOneHostSplitsTheRanksOverTwoGpus) {
  EXPECT_EQ(DefaultDevice(0, true, -1, 8), 0);
  EXPECT_EQ(DefaultDevice(1, true, -1, 8), 1);
  EXPECT_EQ(DefaultDevice(1, true, 5, 8), 1);  // one host: the local rank does not matter
}

TEST(PathChoice, DefaultDeviceAcrossHostsIsEachHostsGpuZero) {
  EXPECT_EQ(DefaultDevice(0, false, -1, 8), 0);
  EXPECT_EQ(DefaultDevice(1, false, -1, 8), 0);  // not GPU 1: rank 1 is alone on its host
  EXPECT_EQ(DefaultDevice(1, false, -1, 1), 0);
}

TEST(PathChoice, DefaultDeviceAcrossHostsFollowsTheLocalRank) {
  EXPECT_EQ(DefaultDevice(0, false, 3, 8), 3);
  EXPECT_EQ(DefaultDevice(1, false, 0, 8), 0);
  EXPECT_EQ(DefaultDevice(1, false, 6, 4), 2);  // modulo the visible GPUs
  EXPECT_EQ(DefaultDevice(0, false, 5, 1), 0);
}

TEST(PathChoice, DefaultDeviceWithOneGpuSharesIt) {
  EXPECT_EQ(DefaultDevice(0, true, -1, 1), 0);
  EXPECT_EQ(DefaultDevice(1, true, -1, 1), 0);
  EXPECT_EQ(DefaultDevice(1, true, 1, 1), 0);
}

TEST(PathChoice, LabelNamesMemoryOnlyWhenNotTheTransportsOwn) {
  EXPECT_EQ(PathLabel("tcp", "host"), "tcp");
  EXPECT_EQ(PathLabel("tcp", "cuda"), "tcp-cuda");
  EXPECT_EQ(PathLabel("cuda", "cuda"), "cuda");
  EXPECT_EQ(PathLabel("shm", ""), "shm");  // a document that does not say
  EXPECT_EQ(MemoryFlagName(MemoryKind::kCuda), std::string("cuda"));
  EXPECT_EQ(MemoryFlagName(MemoryKind::kHost), std::string("host"));
}

}  // namespace
}  // namespace kvbench
