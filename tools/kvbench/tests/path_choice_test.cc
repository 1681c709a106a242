#include "path_choice.h"

#include <gtest/gtest.h>

namespace kvbench {
namespace {

using kvlane::Code;
using kvlane::MemoryKind;

// Resolved for `rank` (the target unless given).
DataPath Resolve(const std::string& transport, const std::string& memory, bool same_host, int gpus,
                 int rank = 0) {
  auto path = ResolveDataPath(transport, memory, same_host, gpus, rank);
  EXPECT_TRUE(path.ok()) << transport << "/" << memory << ": " << path.status().message();
  return path.ok() ? path.value() : DataPath{};
}

Code CodeOf(const std::string& transport, const std::string& memory, bool same_host, int gpus,
            int rank = 0) {
  return ResolveDataPath(transport, memory, same_host, gpus, rank).status().code();
}

TEST(PathChoice, AutoMemoryIsDeviceForCudaOnlyAsBefore) {
  EXPECT_EQ(Resolve("auto", "auto", false, 8).transport, "tcp");
  EXPECT_EQ(Resolve("auto", "auto", false, 8).target, MemoryKind::kHost);
  EXPECT_EQ(Resolve("auto", "auto", true, 0).transport, "shm");
  EXPECT_EQ(Resolve("auto", "auto", true, 1).transport, "shm");  // one GPU: no cuda pair
  EXPECT_EQ(Resolve("auto", "auto", true, 2).transport, "cuda");
  EXPECT_EQ(Resolve("auto", "auto", true, 2).target, MemoryKind::kCuda);
  EXPECT_EQ(Resolve("tcp", "auto", true, 2).target, MemoryKind::kHost);
  EXPECT_EQ(Resolve("cuda", "auto", true, 1).target, MemoryKind::kCuda);
}

TEST(PathChoice, DeviceMemoryOverTcpIsStagedThroughPinnedHost) {
  DataPath path = Resolve("tcp", "cuda", false, 1);
  EXPECT_EQ(path.transport, "tcp");
  EXPECT_EQ(path.target, MemoryKind::kCuda);
  EXPECT_EQ(path.initiator, MemoryKind::kCuda);
  EXPECT_EQ(StagingName(path), "pinned-host");
  EXPECT_EQ(Resolve("auto", "cuda", false, 8).transport, "tcp");  // across hosts
  EXPECT_EQ(Resolve("tcp", "cuda", true, 1).transport, "tcp");    // loopback, one GPU
  EXPECT_EQ(StagingName(Resolve("cuda", "cuda", true, 2)), "none");
  EXPECT_EQ(StagingName(Resolve("tcp", "host", false, 0)), "none");
}

TEST(PathChoice, ExplicitMemorySteersAutoOnOneHost) {
  EXPECT_EQ(Resolve("auto", "cuda", true, 1).transport, "cuda");  // shm cannot reach it
  EXPECT_EQ(Resolve("auto", "host", true, 2).transport, "shm");   // cuda cannot move it
  EXPECT_EQ(Resolve("auto", "host", true, 2).target, MemoryKind::kHost);
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
  auto s = ResolveDataPath("tcp", "cuda", false, 0, 1).status();
  EXPECT_NE(s.message().find("--memory cuda"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("no CUDA device"), std::string::npos) << s.message();
}

TEST(PathChoice, MemoryPairNamesTheTargetFirst) {
  auto pair = ParseMemory("cuda,host");
  ASSERT_TRUE(pair.ok()) << pair.status().message();
  EXPECT_EQ(pair->target, "cuda");
  EXPECT_EQ(pair->initiator, "host");
  EXPECT_TRUE(pair->mixed());
  EXPECT_EQ(pair->Of(1), "host");
  EXPECT_EQ(ParseMemory("host,cuda")->target, "host");
  EXPECT_FALSE(ParseMemory("cuda").value().mixed());  // one word: both ranks
  EXPECT_EQ(ParseMemory("auto")->initiator, "auto");
  EXPECT_FALSE(ParseMemory("cuda,cuda").value().mixed());  // the same as "cuda"
  for (const char* bad :
       {"gpu", "cuda,auto", "auto,host", "cuda,", ",host", "cuda,host,host", "cuda,gpu", ""}) {
    EXPECT_EQ(ParseMemory(bad).status().code(), Code::kInvalidArgument) << bad;
    EXPECT_EQ(CheckTransportMemory("tcp", bad).code(), Code::kInvalidArgument) << bad;
  }
}

TEST(PathChoice, MixedPairResolvesEachRanksMemoryOverTcp) {
  for (int rank : {0, 1}) {
    DataPath offload = Resolve("tcp", "cuda,host", false, 1, rank);
    EXPECT_EQ(offload.transport, "tcp");
    EXPECT_EQ(offload.target, MemoryKind::kCuda);
    EXPECT_EQ(offload.initiator, MemoryKind::kHost);
    EXPECT_TRUE(offload.mixed());
    EXPECT_EQ(MemoryName(offload), "cuda,host");
    DataPath reload = Resolve("tcp", "host,cuda", true, 1, rank);
    EXPECT_EQ(reload.Of(0), MemoryKind::kHost);
    EXPECT_EQ(reload.Of(1), MemoryKind::kCuda);
    EXPECT_EQ(MemoryName(reload), "host,cuda");
  }
  EXPECT_EQ(MemoryName(Resolve("tcp", "cuda", false, 1)), "cuda");
  EXPECT_EQ(MemoryName(Resolve("tcp", "cuda,cuda", false, 1)), "cuda");
}

TEST(PathChoice, MixedPairPicksTcpEvenOnOneHost) {
  EXPECT_EQ(Resolve("auto", "cuda,host", true, 2, 0).transport, "tcp");  // not cuda
  EXPECT_EQ(Resolve("auto", "host,cuda", true, 8, 1).transport, "tcp");
  EXPECT_EQ(Resolve("auto", "cuda,host", false, 1, 0).transport, "tcp");
  EXPECT_TRUE(CheckTransportMemory("auto", "cuda,host").ok());
  EXPECT_TRUE(CheckTransportMemory("tcp", "host,cuda").ok());
}

// Only tcp moves a host pool on one rank and a device pool on the other.
TEST(PathChoice, MixedPairIsRefusedOverLocalShmAndCuda) {
  for (const char* transport : {"local", "shm", "cuda"}) {
    for (const char* pair : {"cuda,host", "host,cuda"}) {
      kvlane::Status s = CheckTransportMemory(transport, pair);
      EXPECT_EQ(s.code(), Code::kInvalidArgument) << transport << " " << pair;
      EXPECT_EQ(s.message().rfind(
                    std::string("--memory ") + pair + " with --transport " + transport + ": ", 0),
                0u)
          << s.message();
      EXPECT_NE(s.message().find("needs --transport tcp"), std::string::npos) << s.message();
      // Refused before the GPUs are counted, on either rank.
      EXPECT_EQ(CodeOf(transport, pair, true, 2, 0), Code::kInvalidArgument);
      EXPECT_EQ(CodeOf(transport, pair, true, 0, 1), Code::kInvalidArgument);
    }
  }
  EXPECT_NE(CheckTransportMemory("shm", "cuda,host").message().find("host memory only"),
            std::string::npos);
  EXPECT_NE(CheckTransportMemory("cuda", "host,cuda").message().find("pageable"),
            std::string::npos);
}

// Only the rank whose pool is on a GPU needs one.
TEST(PathChoice, MixedPairNeedsAGpuOnlyOnItsDeviceSide) {
  EXPECT_EQ(CodeOf("tcp", "cuda,host", false, 0, 0), Code::kNotSupported);
  EXPECT_EQ(Resolve("tcp", "cuda,host", false, 0, 1).initiator, MemoryKind::kHost);
  EXPECT_EQ(CodeOf("tcp", "host,cuda", false, 0, 1), Code::kNotSupported);
  EXPECT_EQ(Resolve("tcp", "host,cuda", false, 0, 0).target, MemoryKind::kHost);
  auto s = ResolveDataPath("auto", "cuda,host", true, 0, 0).status();
  EXPECT_NE(s.message().find("--memory cuda,host (over tcp) puts the target's pool"),
            std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("no CUDA device"), std::string::npos) << s.message();
}

// The engine's tcp transport stages on the side that holds device memory; so do
// the documents and the socket reference.
TEST(PathChoice, MixedPairStagesOnItsDeviceSideOnly) {
  DataPath offload = Resolve("tcp", "cuda,host", false, 1);
  EXPECT_TRUE(StagesOn(offload, 0));
  EXPECT_FALSE(StagesOn(offload, 1));
  EXPECT_EQ(StagingName(offload, 0), "pinned-host");
  EXPECT_EQ(StagingName(offload, 1), "none");
  EXPECT_EQ(StagingName(offload), "pinned-host");
  DataPath reload = Resolve("tcp", "host,cuda", false, 1);
  EXPECT_FALSE(StagesOn(reload, 0));
  EXPECT_TRUE(StagesOn(reload, 1));
  DataPath both = Resolve("tcp", "cuda", false, 1);
  EXPECT_TRUE(StagesOn(both, 0) && StagesOn(both, 1));
  DataPath direct = Resolve("cuda", "cuda", true, 2);
  EXPECT_FALSE(StagesOn(direct, 0) || StagesOn(direct, 1));
  EXPECT_EQ(SocketReferenceMethod(false, false), "socket");
  EXPECT_EQ(SocketReferenceMethod(true, true), "socket-staged");
  EXPECT_EQ(SocketReferenceMethod(true, false), "socket-staged-target");
  EXPECT_EQ(SocketReferenceMethod(false, true), "socket-staged-initiator");
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
  EXPECT_EQ(PathLabel("tcp", "cuda,host"), "tcp-cuda-host");
  EXPECT_EQ(PathLabel("tcp", "host,cuda"), "tcp-host-cuda");
  EXPECT_EQ(MemoryFlagName(MemoryKind::kCuda), std::string("cuda"));
  EXPECT_EQ(MemoryFlagName(MemoryKind::kHost), std::string("host"));
}

}  // namespace
}  // namespace kvbench
