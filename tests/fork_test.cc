// A child made by fork() after its parent made an agent is another process:
// an agent it makes reaches the parent's agent as any process would (shm or
// tcp), not through the copy of that agent in its own memory.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "kvlane/kvlane.h"
#include "test_util.h"

namespace kvlane {
namespace {

constexpr uint64_t kSize = 4096;

// The child's side: writes kSize bytes of 'X' into the parent's `remote`.
// Its exit code says how far it got (0: written, and not over "local").
int WriteFromChild(const std::string& blob, uint64_t remote) {
  AgentOptions o;
  o.name = "child";
  o.transports = {"local", "shm", "tcp"};
  auto c = Agent::Create(o);
  if (!c.ok()) return 10;
  std::vector<uint8_t> src(kSize, 'X');
  if (!(*c)->RegisterMemory(src.data(), kSize).ok()) return 11;
  if (!(*c)->LoadPeer(blob).ok()) return 12;
  auto tr = (*c)->PeerTransport("parent");
  if (!tr.ok()) return 13;
  if (*tr == "local") return 14;  // the parent's agent as copied into this process
  auto h = test::MakeSimple(**c, "parent", Op::kWrite, src.data(),
                            reinterpret_cast<const void*>(remote), kSize);
  if (!h.ok()) return 15;
  if (!test::PostAndWait(**c, &*h).ok()) return 16;
  return 0;
}

TEST(Fork, ChildAgentReachesTheParentNotItsCopy) {
#if defined(__SANITIZE_THREAD__)
  // The child starts threads after a fork of a threaded process, which TSan
  // does not support (die_after_fork); plain and ASan builds run it.
  GTEST_SKIP() << "TSan: no threads after a multi-threaded fork";
#endif
  AgentOptions o;
  o.name = "parent";
  o.transports = {"local", "shm", "tcp"};
  auto a = Agent::Create(o);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  std::vector<uint8_t> dst(kSize, 0);
  ASSERT_TRUE((*a)->RegisterMemory(dst.data(), kSize).ok());
  auto blob = (*a)->ExportMetadata();
  ASSERT_TRUE(blob.ok());
  const pid_t pid = fork();
  ASSERT_GE(pid, 0) << std::strerror(errno);
  if (pid == 0) _exit(WriteFromChild(*blob, reinterpret_cast<uint64_t>(dst.data())));
  int st = 0;
  ASSERT_EQ(waitpid(pid, &st, 0), pid);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0) << "14: the child reached its own copy of the parent's agent";
  EXPECT_EQ(test::FirstNot(dst.data(), kSize, 'X'), -1) << "the parent's buffer did not change";
}

}  // namespace
}  // namespace kvlane
