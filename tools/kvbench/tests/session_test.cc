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

TEST(Session, DevicePoolWithoutAGpuIsNotSupportedAndThePeerIsTold) {
  if (DeviceCount() > 0) GTEST_SKIP() << "a GPU is visible: kvbench_gpu_test covers this path";
  SessionPair p = OpenBoth({"--transport", "tcp"}, {"--transport", "tcp", "--memory", "cuda"});
  ASSERT_FALSE(p.initiator.ok());
  EXPECT_EQ(p.initiator.status().code(), kvlane::Code::kNotSupported);
  EXPECT_NE(p.initiator.status().message().find("no CUDA device"), std::string::npos)
      << p.initiator.status().message();
  ASSERT_FALSE(p.target.ok());
  EXPECT_NE(p.target.status().message().find("peer reported: --memory cuda"), std::string::npos)
      << p.target.status().message();
}

}  // namespace
}  // namespace kvbench
