// The control plane's waits: every wait of a worker's run ends by one deadline,
// taken when the run starts, so a peer that answers just in time each round
// cannot stretch the run past it.
#include "control.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <memory>
#include <thread>

#include "kvlane/agent.h"

namespace lanebench {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

std::unique_ptr<kvlane::Agent> LocalAgent(const std::string& name) {
  kvlane::AgentOptions o;
  o.name = name;
  o.transports = {"local"};
  auto a = kvlane::Agent::Create(o);
  EXPECT_TRUE(a.ok()) << a.status().ToString();
  return a.ok() ? std::move(a.value()) : nullptr;
}

class ControlLinkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    source_ = LocalAgent("source");
    target_ = LocalAgent("target0");
    ASSERT_TRUE(source_ && target_);
    auto blob = target_->ExportMetadata();
    ASSERT_TRUE(blob.ok());
    ASSERT_TRUE(source_->LoadPeer(blob.value()).ok());
    blob = source_->ExportMetadata();
    ASSERT_TRUE(blob.ok());
    ASSERT_TRUE(target_->LoadPeer(blob.value()).ok());
  }
  std::unique_ptr<kvlane::Agent> source_, target_;
};

// The second wait of a run whose deadline has passed ends at once: it does not
// get the run's whole time again. (Bounds with room for a busy host: a second
// wait given its own timeout takes 1 s.)
TEST_F(ControlLinkTest, AWaitAfterTheRunsDeadlineEndsAtOnce) {
  ControlLink link(source_.get());
  const auto deadline = Clock::now() + 1s;
  auto first = link.Await("target0", deadline);
  ASSERT_FALSE(first.ok());
  EXPECT_EQ(first.status().code(), kvlane::Code::kTimeout);
  EXPECT_GE(Clock::now(), deadline);
  const auto second_from = Clock::now();
  auto second = link.Await("target0", deadline);
  const auto second_took = Clock::now() - second_from;
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), kvlane::Code::kTimeout);
  EXPECT_LT(second_took, 500ms) << "the second wait was given its own timeout";
}

// A message that came in is handed over even when the caller asks past the
// deadline: the deadline bounds the wait, not what has already arrived.
TEST_F(ControlLinkTest, AMessageThatCameInIsHandedOverPastTheDeadline) {
  ControlLink link(source_.get());
  ASSERT_TRUE(ControlLink(target_.get()).Send("source", "ready 1").ok());
  const auto until = Clock::now() + 10s;
  kvlane::Result<std::string> got = kvlane::Status::Timeout("not yet");
  while (!got.ok() && Clock::now() < until) {
    got = link.Await("target0", Clock::now() - 1ms);  // passed: a look, no wait
    if (!got.ok()) {
      ASSERT_EQ(got.status().code(), kvlane::Code::kTimeout) << got.status().ToString();
      std::this_thread::sleep_for(1ms);
    }
  }
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got.value(), "ready 1");
}

TEST(AwaitFile, AMissingFileIsATimeoutOnceTheDeadlinePasses) {
  const std::string path = ::testing::TempDir() + "/lanebench_control_test.missing";
  std::filesystem::remove(path);
  const auto from = Clock::now();
  auto got = AwaitFile(path, from + 1s);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), kvlane::Code::kTimeout);
  EXPECT_GE(Clock::now() - from, 1s);
  const auto again_from = Clock::now();
  auto again = AwaitFile(path, from + 1s);
  EXPECT_EQ(again.status().code(), kvlane::Code::kTimeout);
  EXPECT_LT(Clock::now() - again_from, 500ms) << "the second wait was given its own timeout";
  ASSERT_TRUE(WriteFileAtomic(path, "meta").ok());
  auto present = AwaitFile(path, from);  // long past: an existing file is still read
  ASSERT_TRUE(present.ok()) << present.status().ToString();
  EXPECT_EQ(present.value(), "meta");
  std::filesystem::remove(path);
}

// A write that fails (a full disk: here the file-size limit) left
// "<path>.<pid>.tmp" beside the user's path; a short write only failed when the
// stream was destroyed, unchecked, and the truncated file was renamed into place.
TEST(WriteFileAtomic, AFailedWriteLeavesNeitherTheFileNorItsTemporary) {
  const std::string path = ::testing::TempDir() + "/lanebench_control_test.full";
  const std::string tmp = path + "." + std::to_string(getpid()) + ".tmp";
  std::filesystem::remove(path);
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
  rlimit small = old;
  small.rlim_cur = 64;
  auto* const old_handler = std::signal(SIGXFSZ, SIG_IGN);  // EFBIG instead of a core dump
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  // Nothing is printed under the limit (stdout may be a file): results are read after it.
  const kvlane::Status buffered = WriteFileAtomic(path, std::string(100, 'x'));  // fails on close
  const bool left_after_buffered = std::filesystem::exists(tmp) || std::filesystem::exists(path);
  const kvlane::Status large = WriteFileAtomic(path, std::string(1 << 20, 'x'));  // on write
  const bool left_after_large = std::filesystem::exists(tmp) || std::filesystem::exists(path);
  setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_FALSE(buffered.ok()) << "a short write that failed on close";
  EXPECT_FALSE(left_after_buffered) << tmp;
  EXPECT_FALSE(large.ok());
  EXPECT_FALSE(left_after_large) << tmp;
  std::filesystem::remove(tmp);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace lanebench
