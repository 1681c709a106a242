#include "run_config.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace kvbench {
namespace {

// Reads `args` as kvbench run's flags into `c`, then resolves it.
kvlane::Status Resolve(std::vector<std::string> args, RunConfig* c) {
  CLI::App app;
  AddRunFlags(&app, c);
  std::reverse(args.begin(), args.end());  // CLI11 parses a reversed vector
  app.parse(args);
  return c->Resolve();
}

// `args` resolved, which must succeed.
RunConfig Parse(std::vector<std::string> args) {
  RunConfig c;
  EXPECT_TRUE(Resolve(std::move(args), &c).ok());
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

TEST(RunConfig, MemoryPairIsKeptAndForwarded) {
  RunConfig c = Parse({"--transport", "tcp", "--memory", "cuda,host", "--device", "0"});
  EXPECT_EQ(c.memory, "cuda,host");  // one argument, not two: --memory is not a list
  RunConfig again = Parse(c.ForwardArgs());
  EXPECT_EQ(again.memory, "cuda,host");
  EXPECT_EQ(again.ForwardArgs(), c.ForwardArgs());
  EXPECT_EQ(Parse({"--memory", "host,cuda"}).memory, "host,cuda");  // transport auto: tcp
}

TEST(RunConfig, LeftOutSamplingIsThePresets) {
  RunConfig quick = Parse({"--samples", "5"});  // the others left out: the preset's
  EXPECT_EQ(quick.samples, 5);
  EXPECT_EQ(quick.warmup, 2);
  EXPECT_EQ(quick.trials, 2);
  EXPECT_EQ(Parse({"--warmup", "0"}).warmup, 0);
}

// Flags that Resolve refuses with kInvalidArgument (kvbench run exits 2), before
// any rank starts or connects.
struct Refusal {
  std::string name;               // the case, as the test's name ends
  std::vector<std::string> args;  // the flags, as on the command line
  std::vector<std::string> says;  // each is in the refusal's message
  bool opens = false;             // and the first one begins it
};

void PrintTo(const Refusal& r, std::ostream* os) {
  for (const std::string& a : r.args) *os << a << " ";
}

std::vector<Refusal> Refusals() {
  return {
      // Memory the transport cannot move: the refusal names the pair.
      {"CudaOverShm",
       {"--memory", "cuda", "--transport", "shm"},
       {"--memory cuda with --transport shm"}},
      {"CudaOverLocal",
       {"--memory", "cuda", "--transport", "local"},
       {"--memory cuda with --transport local"}},
      {"HostOverCuda",
       {"--memory", "host", "--transport", "cuda"},
       {"--memory host with --transport cuda"}},
      // A mixed pair over a transport that cannot move both kinds: the refusal names
      // the pair and the transport, and the one that can.
      {"CudaHostOverLocal",
       {"--memory", "cuda,host", "--transport", "local"},
       {"--memory cuda,host with --transport local", "needs --transport tcp"}},
      {"HostCudaOverLocal",
       {"--memory", "host,cuda", "--transport", "local"},
       {"--memory host,cuda with --transport local", "needs --transport tcp"}},
      {"CudaHostOverShm",
       {"--memory", "cuda,host", "--transport", "shm"},
       {"--memory cuda,host with --transport shm", "needs --transport tcp"}},
      {"HostCudaOverShm",
       {"--memory", "host,cuda", "--transport", "shm"},
       {"--memory host,cuda with --transport shm", "needs --transport tcp"}},
      {"CudaHostOverCuda",
       {"--memory", "cuda,host", "--transport", "cuda"},
       {"--memory cuda,host with --transport cuda", "needs --transport tcp"}},
      {"HostCudaOverCuda",
       {"--memory", "host,cuda", "--transport", "cuda"},
       {"--memory host,cuda with --transport cuda", "needs --transport tcp"}},
      // -1 (or any negative) is no way to say "the preset's": leaving the flag out
      // is. The refusal begins with the flag.
      {"WarmupMinus1", {"--warmup", "-1"}, {"--warmup -1: need at least "}, true},
      {"WarmupMinus2", {"--warmup", "-2"}, {"--warmup -2: need at least "}, true},
      {"SamplesMinus1", {"--samples", "-1"}, {"--samples -1: need at least "}, true},
      {"SamplesMinus2", {"--samples", "-2"}, {"--samples -2: need at least "}, true},
      {"TrialsMinus1", {"--trials", "-1"}, {"--trials -1: need at least "}, true},
      {"TrialsMinus2", {"--trials", "-2"}, {"--trials -2: need at least "}, true},
      {"TrialsMinus3", {"--trials", "-3"}, {"--trials -3: need at least "}, true},
      {"SamplesZero", {"--samples", "0"}, {"--samples 0: need at least 1"}, true},
      // Past the caps: a row's burst count stays an int (it used to wrap and crash).
      {"SamplesPastTheCap",
       {"--samples", "1073741824"},
       {"--samples 1073741824: need at least 1 and at most 1000000"},
       true},
      {"BurstsPerRowPastTheCap",
       {"--samples", "1000000", "--trials", "2"},
       {"--warmup + --samples x --trials: 2 + 1000000 x 2 bursts per row, at most 1000000"},
       true},
      // The ladders, checked before any rank starts (they used to be checked only
      // once the peer connected; a huge ISL took minutes and gigabytes to refuse).
      {"IslZero", {"--isl", "8192,0"}, {"--isl 0: need 1..16777216 tokens"}, true},
      {"IslPastTheCap",
       {"--isl", "99999999999999"},
       {"--isl 99999999999999: need 1..16777216"},
       true},
      {"BatchZero", {"--batches", "0"}, {"--batches 0: need 1..4096"}, true},
      {"BatchPastTheCap", {"--batches", "1,4097"}, {"--batches 4097: need 1..4096"}, true},
      // Other bad choices.
      {"UnknownTransport", {"--transport", "rdma"}, {"unknown transport 'rdma'"}},
      {"UnknownOp", {"--ops", "pull,fetch"}, {"unknown op 'fetch'"}},
      {"OpTwice", {"--ops", "pull,pull"}, {"--ops names pull twice"}},
      {"OpTwiceApart", {"--ops", "push,pull,push"}, {"--ops names push twice"}},
      {"DtypeOfDsv4", {"--dtype", "fp8"}, {"kv-dsv4: --dtype fp8 applies to kv-mla only"}},
      {"BlockSplittingAState", {"--block", "1"}, {"kv-dsv4: block 1 splits an HCA state"}},
      {"RankWithoutPeer", {"--rank", "1"}, {"--rank is 0 or 1 and needs --peer HOST:PORT"}},
      {"LocalWithARank",
       {"--transport", "local", "--rank", "0", "--peer", "127.0.0.1:7000"},
       {"--transport local moves bytes within one process"}},
      {"PeerPortZero",
       {"--rank", "0", "--peer", "127.0.0.1:0"},
       {"--peer 127.0.0.1:0: the port rank 0 listens on, 1..65535"}},
      {"PeerWithoutRank", {"--peer", "127.0.0.1:7000"}, {"--peer 127.0.0.1:7000 needs --rank 0|1"}},
      {"LanesMinus1",
       {"--lanes", "-1"},
       {"--lanes is 1..64, or 0 for the engine's default; got -1"}},
      {"Lanes65", {"--lanes", "65"}, {"--lanes is 1..64, or 0 for the engine's default; got 65"}},
      {"UnknownMemory", {"--memory", "gpu"}, {"unknown memory 'gpu'"}},
      {"MemoryPairWithAuto", {"--memory", "cuda,auto"}, {"--memory 'cuda,auto': a pair names"}},
      {"MemoryPairWithUnknown", {"--memory", "cuda,gpu"}, {"--memory 'cuda,gpu': a pair names"}},
      {"UnknownPolicy", {"--policy", "fifo"}, {"unknown policy 'fifo'"}},
      {"ZeroControlTimeout", {"--control-timeout", "0"}, {"--control-timeout must be positive"}},
      // Time arithmetic on it overflowed (the parser takes up to 999999999m).
      {"HugeControlTimeout",
       {"--control-timeout", "999999999m"},
       {"--control-timeout is at most 7 days (604800000ms); got 59999999940000ms"}},
      {"ControlTimeoutOverAWeek",
       {"--control-timeout", "10081m"},
       {"--control-timeout is at most 7 days"}},
      {"NegativeDevice", {"--device", "-7"}, {"--device is a GPU index"}},
      {"CaseWithASlash", {"--case", "a/b"}, {"--case 'a/b' names a file in --out: no '/'"}},
      {"CaseDotDot", {"--case", ".."}, {"--case '..' names a file in --out: no '/'"}},
      // A descriptor count takes no unit; bytes do, but only known ones.
      {"DescBudgetWithAUnit",
       {"--desc-budget", "64K"},
       {"--desc-budget '64K' is a descriptor count: a plain number"},
       true},
      {"PoolBudgetUnknownUnit", {"--pool-budget", "2Q"}, {"cannot read '2Q' as a byte count"}},
  };
}

class RunConfigRefusal : public ::testing::TestWithParam<Refusal> {};

TEST_P(RunConfigRefusal, IsInvalidArgumentSayingWhy) {
  const Refusal& r = GetParam();
  RunConfig c;
  kvlane::Status s = Resolve(r.args, &c);
  EXPECT_EQ(s.code(), kvlane::Code::kInvalidArgument) << s.ToString();
  for (const std::string& part : r.says) {
    EXPECT_NE(s.message().find(part), std::string::npos) << s.message() << "\nlacks: " << part;
  }
  if (r.opens) EXPECT_EQ(s.message().rfind(r.says.front(), 0), 0u) << s.message();
}

INSTANTIATE_TEST_SUITE_P(Flags, RunConfigRefusal, ::testing::ValuesIn(Refusals()),
                         [](const auto& info) { return info.param.name; });

TEST(RunConfig, ControlTimeoutFromEnvironment) {
  ::setenv("KVBENCH_CONTROL_TIMEOUT", "1500ms", 1);
  EXPECT_EQ(Parse({}).control_timeout_ms.count(), 1500);
  ::unsetenv("KVBENCH_CONTROL_TIMEOUT");
  EXPECT_EQ(ParseDuration("5m").value().count(), 300000);
  EXPECT_FALSE(ParseDuration("fast").ok());
}

// A bad value from the environment names the variable (KVBENCH_CONTROL_TIMEOUT=bad
// used to say only "cannot read 'bad' as a duration"); from the flag, the flag.
TEST(RunConfig, ABadValueNamesItsVariableOrFlag) {
  RunConfig c;
  ::setenv("KVBENCH_CONTROL_TIMEOUT", "bad", 1);
  kvlane::Status s = Resolve({}, &c);
  EXPECT_EQ(s.message().rfind("KVBENCH_CONTROL_TIMEOUT: cannot read 'bad'", 0), 0u) << s.message();
  RunConfig flag;
  s = Resolve({"--control-timeout", "slow"}, &flag);
  EXPECT_EQ(s.message().rfind("--control-timeout: cannot read 'slow'", 0), 0u) << s.message();
  ::unsetenv("KVBENCH_CONTROL_TIMEOUT");
  ::setenv("KVBENCH_DESC_BUDGET", "-5", 1);
  RunConfig desc;
  s = Resolve({}, &desc);
  EXPECT_EQ(s.message().rfind("KVBENCH_DESC_BUDGET '-5' is a descriptor count", 0), 0u)
      << s.message();
  EXPECT_NE(s.message().find("not a negative one"), std::string::npos) << s.message();
  ::unsetenv("KVBENCH_DESC_BUDGET");
}

// A negative value of an unsigned flag is refused in a line, not with CLI11's range of
// 309 digits ("Value -5 not in range 0.000000 to 17976931348623157...").
TEST(RunConfig, ANegativeCountIsRefusedReadably) {
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"--isl", "-5"}, {"--batches", "1,-1"}, {"--seed", "-1"}}) {
    RunConfig c;
    try {
      (void)Resolve(args, &c);
      ADD_FAILURE() << args[0] << " " << args[1] << " was accepted";
    } catch (const CLI::ValidationError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(args[0] + ": '-"), std::string::npos) << what;
      EXPECT_NE(what.find("a negative number; this flag takes 0 or more"), std::string::npos)
          << what;
      EXPECT_LT(what.size(), 100u) << what;
    }
  }
}

}  // namespace
}  // namespace kvbench
