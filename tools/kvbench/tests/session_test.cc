// Session::Open's agreement on the data path (transport and pool memory): ranks
// that resolve differently stop before either allocates a pool, and a rank that
// cannot resolve tells its peer why.
#include "session.h"

#include <gtest/gtest.h>

#include "device_memory.h"
#include "session_pair.h"

namespace kvbench {
namespace {

using testing::OpenBoth;
using testing::SessionPair;

TEST(Session, RanksThatAgreeOpenOnTheResolvedPath) {
  SessionPair p = OpenBoth({"--transport", "tcp"}, {"--transport", "tcp", "--memory", "host"});
  ASSERT_TRUE(p.target.ok()) << p.target.status().ToString();
  ASSERT_TRUE(p.initiator.ok()) << p.initiator.status().ToString();
  const Session& s = *p.initiator.value();
  EXPECT_EQ(s.path().transport, "tcp");
  EXPECT_EQ(s.kind(), kvlane::MemoryKind::kHost);
  EXPECT_EQ(s.transport_used(), "tcp");
  EXPECT_EQ(p.target.value()->kind(), kvlane::MemoryKind::kHost);
}

TEST(Session, RanksThatResolveDifferentPathsStopBeforeAnyPool) {
  SessionPair p = OpenBoth({"--transport", "tcp"}, {"--transport", "shm"});
  for (const auto* side : {&p.target, &p.initiator}) {
    ASSERT_FALSE(side->ok());
    EXPECT_EQ(side->status().code(), kvlane::Code::kInvalidArgument);
    EXPECT_NE(side->status().message().find("disagree on the data path"), std::string::npos)
        << side->status().message();
  }
}

// Each rank checks the peer's announced memory against its own pair: a rank whose
// pool is where both want it still stops when the other rank's is not.
TEST(Session, RanksThatDisagreeOnAMemoryPairStopBeforeAnyPool) {
  for (const auto& [target, initiator] :
       {std::pair<const char*, const char*>{"host,cuda", "host"}, {"host", "cuda,host"}}) {
    SessionPair p = OpenBoth({"--transport", "tcp", "--memory", target},
                             {"--transport", "tcp", "--memory", initiator});
    for (const auto* side : {&p.target, &p.initiator}) {
      ASSERT_FALSE(side->ok()) << target << " vs " << initiator;
      EXPECT_EQ(side->status().code(), kvlane::Code::kInvalidArgument);
      EXPECT_NE(side->status().message().find("disagree on the data path"), std::string::npos)
          << side->status().message();
    }
    EXPECT_NE(p.target.status().message().find("this rank (target)"), std::string::npos)
        << p.target.status().message();
  }
}

// The document records one staging copy: ranks given different ones stop.
TEST(Session, RanksThatDisagreeOnTheStagingCopyStop) {
  SessionPair p = OpenBoth({"--transport", "tcp", "--staging-copy", "kernel"},
                           {"--transport", "tcp", "--staging-copy", "batch"});
  for (const auto* side : {&p.target, &p.initiator}) {
    ASSERT_FALSE(side->ok());
    EXPECT_EQ(side->status().code(), kvlane::Code::kInvalidArgument);
    EXPECT_NE(side->status().message().find("--staging-copy"), std::string::npos)
        << side->status().message();
  }
  SessionPair same = OpenBoth({"--transport", "tcp", "--staging-copy", "each"},
                              {"--transport", "tcp", "--staging-copy", "each"});
  ASSERT_TRUE(same.target.ok()) << same.target.status().ToString();
  ASSERT_TRUE(same.initiator.ok()) << same.initiator.status().ToString();
  EXPECT_EQ(same.initiator.value()->agent().options().staging_copy, kvlane::StagingCopy::kEach);
}

// Each rank places the requests by block tables from its own --seed: ranks given
// different seeds stop before any pool instead of failing every row's verification.
TEST(Session, RanksThatDisagreeOnTheSeedStop) {
  SessionPair p =
      OpenBoth({"--transport", "shm", "--seed", "1"}, {"--transport", "shm", "--seed", "2"});
  for (const auto* side : {&p.target, &p.initiator}) {
    ASSERT_FALSE(side->ok());
    EXPECT_EQ(side->status().code(), kvlane::Code::kInvalidArgument);
    EXPECT_NE(side->status().message().find("--seed"), std::string::npos)
        << side->status().message();
  }
}

// cuda,host: the target's pool on a GPU, the initiator's in host memory. Without a
// GPU the target cannot place its pool (NotSupported) and the initiator hears why;
// with one both open, each on its own kind of memory.
TEST(Session, AMixedPairPutsEachRanksPoolInItsOwnMemory) {
  SessionPair p = OpenBoth({"--transport", "tcp", "--memory", "cuda,host", "--device", "0"},
                           {"--transport", "tcp", "--memory", "cuda,host", "--device", "0"});
  if (DeviceCount() == 0) {
    ASSERT_FALSE(p.target.ok());
    EXPECT_EQ(p.target.status().code(), kvlane::Code::kNotSupported);
    EXPECT_NE(p.target.status().message().find("no CUDA device"), std::string::npos)
        << p.target.status().message();
    ASSERT_FALSE(p.initiator.ok());
    EXPECT_NE(p.initiator.status().message().find("peer reported:"), std::string::npos)
        << p.initiator.status().message();
    return;
  }
  ASSERT_TRUE(p.target.ok()) << p.target.status().ToString();
  ASSERT_TRUE(p.initiator.ok()) << p.initiator.status().ToString();
  EXPECT_EQ(p.target.value()->kind(), kvlane::MemoryKind::kCuda);
  EXPECT_EQ(p.target.value()->peer_kind(), kvlane::MemoryKind::kHost);
  EXPECT_EQ(p.initiator.value()->kind(), kvlane::MemoryKind::kHost);
  EXPECT_EQ(p.initiator.value()->peer_kind(), kvlane::MemoryKind::kCuda);
  EXPECT_EQ(p.initiator.value()->transport_used(), "tcp");
}

// GPU 64 exists nowhere: on a host without a GPU the initiator cannot place a
// device pool (NotSupported), on one with GPUs it has no GPU 64 (InvalidArgument).
// Either way it fails while resolving its path, and the target hears why.
TEST(Session, ARankThatCannotResolveTellsItsPeerWhy) {
  SessionPair p = OpenBoth({"--transport", "tcp"},
                           {"--transport", "tcp", "--memory", "cuda", "--device", "64"});
  ASSERT_FALSE(p.initiator.ok());
  EXPECT_EQ(p.initiator.status().code(),
            DeviceCount() > 0 ? kvlane::Code::kInvalidArgument : kvlane::Code::kNotSupported)
      << p.initiator.status().ToString();
  ASSERT_FALSE(p.target.ok());
  EXPECT_NE(p.target.status().message().find("peer reported:"), std::string::npos)
      << p.target.status().message();
}

}  // namespace
}  // namespace kvbench
