#include "slurm.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace kvbench {
namespace {

TEST(Slurm, FirstHostOfNodeLists) {
  EXPECT_EQ(FirstSlurmHost("node1").value(), "node1");
  EXPECT_EQ(FirstSlurmHost("node1,node2").value(), "node1");
  EXPECT_EQ(FirstSlurmHost("gpu[07-08,11],cpu1").value(), "gpu07");
  EXPECT_EQ(FirstSlurmHost("gpu[3,5]").value(), "gpu3");
  EXPECT_EQ(FirstSlurmHost("a1,gpu[07-08]").value(), "a1");
  EXPECT_FALSE(FirstSlurmHost("").ok());
  EXPECT_FALSE(FirstSlurmHost("gpu[").ok());
  EXPECT_FALSE(FirstSlurmHost("gpu[]").ok());
}

class SlurmEnv : public ::testing::Test {
 protected:
  void TearDown() override {
    for (const char* v : {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_STEP_NODELIST", "KVBENCH_PORT",
                          "SLURM_LOCALID", "LOCAL_RANK"})
      unsetenv(v);
  }
};

TEST_F(SlurmEnv, TwoTasksGiveRankAndPeer) {
  setenv("SLURM_PROCID", "1", 1);
  setenv("SLURM_NTASKS", "2", 1);
  setenv("SLURM_STEP_NODELIST", "h[12-13]", 1);
  setenv("KVBENCH_PORT", "4000", 1);
  RunConfig c;
  ASSERT_TRUE(ApplySlurm(&c).ok());
  EXPECT_EQ(c.rank, 1);
  EXPECT_EQ(c.peer, "h12:4000");
}

TEST_F(SlurmEnv, ExplicitRankAndOtherTaskCountsAreLeftAlone) {
  setenv("SLURM_PROCID", "0", 1);
  setenv("SLURM_NTASKS", "4", 1);
  RunConfig c;
  ASSERT_TRUE(ApplySlurm(&c).ok());
  EXPECT_EQ(c.rank, -1);  // not a two-rank job: spawn locally as usual
  // An explicit --rank: Slurm's is not read.
  setenv("SLURM_NTASKS", "2", 1);
  setenv("SLURM_PROCID", "1", 1);
  c.rank = 0;
  ASSERT_TRUE(ApplySlurm(&c).ok());
  EXPECT_EQ(c.rank, 0);
  EXPECT_TRUE(c.peer.empty());
  // An explicit --peer under Slurm: the rank comes from Slurm, the peer stays.
  setenv("SLURM_STEP_NODELIST", "h[12-13]", 1);
  c.rank = -1;
  c.peer = "x:1";
  ASSERT_TRUE(ApplySlurm(&c).ok());
  EXPECT_EQ(c.rank, 1);
  EXPECT_EQ(c.peer, "x:1");
}

TEST_F(SlurmEnv, LocalRankFromSlurmThenLocalRank) {
  unsetenv("SLURM_LOCALID");
  unsetenv("LOCAL_RANK");
  EXPECT_EQ(LocalRank(), -1);
  setenv("LOCAL_RANK", "3", 1);
  EXPECT_EQ(LocalRank(), 3);
  setenv("SLURM_LOCALID", "1", 1);
  EXPECT_EQ(LocalRank(), 1);  // Slurm's first
  setenv("SLURM_LOCALID", "x", 1);
  EXPECT_EQ(LocalRank(), 3);  // not a number: the next one
  setenv("LOCAL_RANK", "-2", 1);
  EXPECT_EQ(LocalRank(), -1);
}

}  // namespace
}  // namespace kvbench
