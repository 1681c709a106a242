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
