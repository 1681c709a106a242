#include "run_config.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>

namespace kvbench {
namespace {

RunConfig Parse(std::vector<std::string> args) {
  RunConfig c;
  CLI::App app;
  AddRunFlags(&app, &c);
  std::reverse(args.begin(), args.end());  // CLI11 parses a reversed vector
  app.parse(args);
  EXPECT_TRUE(c.Resolve().ok());
  return c;
}

TEST(RunConfig, EmbeddedDefaultIsSmall) {
  RunConfig c = Parse({});
  EXPECT_EQ(c.rank, -1);  // spawn both ranks
  EXPECT_EQ(c.transport, "auto");
  EXPECT_EQ(c.plan_defaults.isl, (std::vector<uint64_t>{8192, 32768}));
  EXPECT_EQ(c.plan_defaults.batches, (std::vector<uint64_t>{1, 2, 4}));
  EXPECT_LE(std::stoull(c.grid.pool_budget), 64ull << 30);
  EXPECT_TRUE(c.pool_budget_auto);
}

TEST(RunConfig, FullGridIsTheDesignGrid) {
  RunConfig c = Parse({"--grid", "full"});
  EXPECT_EQ(c.plan_defaults.isl.size(), 4u);
  EXPECT_EQ(c.plan_defaults.batches.back(), 32u);
  EXPECT_EQ(c.warmup, 2);
  EXPECT_EQ(c.samples, 16);
  EXPECT_EQ(c.trials, 3);
}

TEST(RunConfig, ForwardedArgumentsReproduceTheConfig) {
  RunConfig c = Parse({"--workload", "kv-mla", "--block", "16", "--dtype", "fp8", "--isl",
                       "8192,16384", "--ops", "push", "--samples", "5", "--transport", "tcp",
                       "--pool-budget", "2GiB", "--control-timeout", "90s"});
  RunConfig again = Parse(c.ForwardArgs());
  EXPECT_EQ(again.ForwardArgs(), c.ForwardArgs());
  EXPECT_EQ(again.grid.workload.name, "kv-mla");
  EXPECT_EQ(again.grid.isl, (std::vector<uint64_t>{8192, 16384}));
  EXPECT_EQ(again.ops, (std::vector<std::string>{"push"}));
  EXPECT_EQ(again.samples, 5);
  EXPECT_EQ(again.control_timeout_ms.count(), 90000);
  EXPECT_FALSE(again.pool_budget_auto);
  EXPECT_EQ(again.grid.workload.dtype, "fp8");
  std::vector<std::string> dsv4 = Parse({}).ForwardArgs();  // no --dtype given, none forwarded
  EXPECT_EQ(std::find(dsv4.begin(), dsv4.end(), "--dtype"), dsv4.end());
}

TEST(RunConfig, AutomaticBudgetIsNotForwarded) {
  RunConfig c = Parse({});
  ASSERT_TRUE(c.pool_budget_auto);
  std::vector<std::string> args = c.ForwardArgs();
  EXPECT_EQ(std::find(args.begin(), args.end(), "--pool-budget"), args.end());
  EXPECT_TRUE(Parse(args).pool_budget_auto);  // each spawned rank derives its own
}

TEST(RunConfig, DeviceBudgetComesFromGpuFreeMemory) {
  const uint64_t kGiB = 1ull << 30;
  EXPECT_EQ(DevicePoolBudget(64 * kGiB, 40 * kGiB, 1), 32 * kGiB);   // 80 % of free
  EXPECT_EQ(DevicePoolBudget(64 * kGiB, 40 * kGiB, 2), 16 * kGiB);   // two ranks on one GPU
  EXPECT_EQ(DevicePoolBudget(64 * kGiB, 140 * kGiB, 1), 64 * kGiB);  // capped at the default
  EXPECT_EQ(DevicePoolBudget(64 * kGiB, 0, 1), 64 * kGiB);           // unknown free memory
}

TEST(RunConfig, MemoryFlagDefaultsToAutoAndIsForwarded) {
  EXPECT_EQ(Parse({}).memory, "auto");
  RunConfig c = Parse({"--transport", "tcp", "--memory", "cuda", "--device", "0"});
  EXPECT_EQ(c.memory, "cuda");  // GPUs are counted by the session, not here
  RunConfig again = Parse(c.ForwardArgs());
  EXPECT_EQ(again.memory, "cuda");
  EXPECT_EQ(again.transport, "tcp");
  EXPECT_EQ(again.device, 0);
  EXPECT_EQ(again.ForwardArgs(), c.ForwardArgs());
}

// Each refusal is InvalidArgument and names the pair, before any rank connects.
TEST(RunConfig, RejectsMemoryTheTransportCannotMove) {
  for (std::vector<std::string> bad :
       {std::vector<std::string>{"--memory", "cuda", "--transport", "shm"},
        {"--memory", "cuda", "--transport", "local"},
        {"--memory", "host", "--transport", "cuda"}}) {
    RunConfig c;
    CLI::App app;
    AddRunFlags(&app, &c);
    std::reverse(bad.begin(), bad.end());
    app.parse(bad);
    kvlane::Status s = c.Resolve();
    EXPECT_EQ(s.code(), kvlane::Code::kInvalidArgument) << bad.front();
    EXPECT_NE(s.message().find("--memory " + c.memory), std::string::npos) << s.message();
  }
}

TEST(RunConfig, MemoryPairIsKeptAndForwarded) {
  RunConfig c = Parse({"--transport", "tcp", "--memory", "cuda,host", "--device", "0"});
  EXPECT_EQ(c.memory, "cuda,host");  // one argument, not two: --memory is not a list
  RunConfig again = Parse(c.ForwardArgs());
  EXPECT_EQ(again.memory, "cuda,host");
  EXPECT_EQ(again.ForwardArgs(), c.ForwardArgs());
  EXPECT_EQ(Parse({"--memory", "host,cuda"}).memory, "host,cuda");  // transport auto: tcp
}

// A mixed pair over a transport that cannot move both kinds is refused while the
// flags are read, naming the pair and the transport.
TEST(RunConfig, RejectsAMemoryPairOverLocalShmOrCuda) {
  for (const char* transport : {"local", "shm", "cuda"}) {
    for (const char* pair : {"cuda,host", "host,cuda"}) {
      std::vector<std::string> bad = {"--memory", pair, "--transport", transport};
      RunConfig c;
      CLI::App app;
      AddRunFlags(&app, &c);
      std::reverse(bad.begin(), bad.end());
      app.parse(bad);
      kvlane::Status s = c.Resolve();
      EXPECT_EQ(s.code(), kvlane::Code::kInvalidArgument) << transport << " " << pair;
      EXPECT_NE(
          s.message().find(std::string("--memory ") + pair + " with --transport " + transport),
          std::string::npos)
          << s.message();
      EXPECT_NE(s.message().find("needs --transport tcp"), std::string::npos) << s.message();
    }
  }
}

TEST(RunConfig, RejectsBadChoices) {
  for (std::vector<std::string> bad : {std::vector<std::string>{"--transport", "rdma"},
                                       {"--ops", "pull,fetch"},
                                       {"--ops", "pull,pull"},
                                       {"--ops", "push,pull,push"},
                                       {"--dtype", "fp8"},  // kv-dsv4: refused before any rank
                                       {"--block", "1"},
                                       {"--rank", "1"},
                                       {"--samples", "0"},
                                       {"--samples", "-1"},
                                       {"--warmup", "-1"},
                                       {"--trials", "-1"},
                                       {"--lanes", "-1"},
                                       {"--lanes", "65"},
                                       {"--memory", "gpu"},
                                       {"--memory", "cuda,auto"},
                                       {"--memory", "cuda,gpu"},
                                       {"--policy", "fifo"},
                                       {"--peer", "127.0.0.1:7000"},
                                       {"--rank", "-2", "--peer", "127.0.0.1:7000"},
                                       {"--control-timeout", "0"},
                                       {"--warmup", "-2"},
                                       {"--trials", "-3"},
                                       {"--device", "-7"},
                                       {"--case", "a/b"},
                                       {"--case", ".."}}) {
    const std::string flags = bad[0] + " " + bad[1];  // parse() consumes the vector
    RunConfig c;
    CLI::App app;
    AddRunFlags(&app, &c);
    std::reverse(bad.begin(), bad.end());
    app.parse(bad);
    EXPECT_FALSE(c.Resolve().ok()) << flags;
  }
}

// -1 (or any negative) is no way to say "the preset's": leaving the flag out is. Each
// is refused by Resolve (kvbench run exits 2) with a message that names the flag.
TEST(RunConfig, NegativeSamplingIsRefusedNamingTheFlag) {
  for (const char* flag : {"--warmup", "--samples", "--trials"}) {
    for (const char* value : {"-1", "-2"}) {
      std::vector<std::string> bad = {flag, value};
      RunConfig c;
      CLI::App app;
      AddRunFlags(&app, &c);
      std::reverse(bad.begin(), bad.end());
      app.parse(bad);
      kvlane::Status s = c.Resolve();
      EXPECT_EQ(s.code(), kvlane::Code::kInvalidArgument) << flag << " " << value;
      EXPECT_EQ(s.message().rfind(std::string(flag) + " " + value + ": need at least ", 0), 0u)
          << s.message();
    }
  }
  RunConfig quick = Parse({"--samples", "5"});  // the others left out: the preset's
  EXPECT_EQ(quick.samples, 5);
  EXPECT_EQ(quick.warmup, 2);
  EXPECT_EQ(quick.trials, 2);
  EXPECT_EQ(Parse({"--warmup", "0"}).warmup, 0);
}

TEST(RunConfig, ControlTimeoutFromEnvironment) {
  ::setenv("KVBENCH_CONTROL_TIMEOUT", "1500ms", 1);
  EXPECT_EQ(Parse({}).control_timeout_ms.count(), 1500);
  ::unsetenv("KVBENCH_CONTROL_TIMEOUT");
  EXPECT_EQ(ParseDuration("5m").value().count(), 300000);
  EXPECT_FALSE(ParseDuration("fast").ok());
}

}  // namespace
}  // namespace kvbench
