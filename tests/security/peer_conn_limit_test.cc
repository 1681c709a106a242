// One peer may hold at most AgentOptions::max_conns_per_peer connections at once
// on a target, over its tcp and shm servers together, a peer being the name its
// Hello announced: past the cap its handshake is refused (kNotAllowed, saying
// why) and the connection closed, while other peers still connect; a
// connection's slot is free again once it ends, and a refused Hello takes none.
#include <gtest/gtest.h>

#include <cassert>
#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "raw_peer.h"
#include "test_util.h"

namespace kvlane::test {
namespace {

using namespace std::chrono_literals;

constexpr uint32_t kCap = 4;  // a real agent's channel takes 3 (lanes_per_peer 2 + control)
constexpr int32_t kNotAllowed = static_cast<int32_t>(Code::kNotAllowed);
constexpr uint32_t kConnLimit = static_cast<uint32_t>(core::HelloRefusal::kPeerConnLimit);

class PeerConnLimitTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    AgentOptions o = OptionsFor("target", GetParam());
    o.transports = {"tcp", "shm"};  // the raw peers use GetParam()'s unless told
    o.max_conns_per_peer = kCap;
    auto t = Agent::Create(o);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    target_ = std::move(t).value();
    ASSERT_TRUE(target_->RegisterMemory(region_.data(), region_.size()).ok());
    info_ = Inspect(target_->ExportMetadata().value());
  }

  // Opens a connection over `transport` (default: GetParam()) and says Hello as
  // `name` with `secret` (default: the target's); the reply's status, nullopt when
  // none came. The connection is kept as held_.back(); one that fails to open
  // fails the test and adds nothing (last_kept_ says which), so that DropLast never
  // closes an earlier connection in its place.
  std::optional<int32_t> Hello(const std::string& name, const core::Secret* secret = nullptr,
                               const std::string& transport = "") {
    auto p = RawPeer::Connect(transport.empty() ? GetParam() : transport, info_.meta);
    last_kept_ = p.has_value();
    if (!p) {
      ADD_FAILURE() << "could not connect to the target";
      return std::nullopt;
    }
    auto st = p->Hello(info_.meta.agent_id, secret ? *secret : info_.meta.secret,
                       core::kWireVersion, core::kHelloMagic, name);
    held_.push_back(std::move(*p));
    return st;
  }
  // The connection of the last Hello. REQUIRES: it opened (the callers assert its reply).
  RawPeer& Last() {
    assert(last_kept_);
    return held_.back();
  }
  // Closes the connection of the last Hello, if it opened.
  void DropLast() {
    if (std::exchange(last_kept_, false)) held_.pop_back();
  }

  // An agent named `name` that loaded the target and sends it a notification
  // (which opens a channel: lanes_per_peer + 1 connections). Kept in agents_.
  Status Reach(const std::string& name) {
    auto a = Agent::Create(OptionsFor(name, GetParam()));
    if (!a.ok()) return a.status();
    agents_.push_back(std::move(a).value());
    Connect(*agents_.back(), *target_);
    return agents_.back()->SendNotification("target", "hello from " + name);
  }

  std::vector<uint8_t> region_ = std::vector<uint8_t>(64 << 10);
  std::unique_ptr<Agent> target_;
  TargetInfo info_;
  std::vector<RawPeer> held_;
  bool last_kept_ = false;  // whether held_.back() is the last Hello's connection
  std::vector<std::unique_ptr<Agent>> agents_;
};

TEST_P(PeerConnLimitTest, OnePeerIsCappedWhileOthersConnect) {
  for (uint32_t i = 0; i < kCap; ++i) ASSERT_EQ(Hello("evil").value_or(-100), 0) << i;
  // One more as "evil": refused after the handshake, saying why, and closed.
  ASSERT_EQ(Hello("evil").value_or(-100), kNotAllowed);
  EXPECT_EQ(Last().last_refusal(), kConnLimit);
  EXPECT_TRUE(Last().ClosedWithin(2s));
  DropLast();
  // A real agent of that name sees the limit named, as not-allowed: a refusal, not
  // a peer that went away (as handshake_test).
  Status s = Reach("evil");
  EXPECT_EQ(s.code(), Code::kNotAllowed) << s.ToString();
  EXPECT_NE(s.message().find("not-allowed: peer 'target' refused the connection"),
            std::string::npos)
      << s.ToString();
  EXPECT_NE(s.message().find("max_conns_per_peer"), std::string::npos) << s.ToString();
  // Other peers still get through: a raw one, and a real agent's whole channel.
  EXPECT_EQ(Hello("other").value_or(-100), 0);
  ASSERT_TRUE(Reach("a").ok());
  auto got = TakeAtLeast(*target_, 1, 5s);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].peer, "a");
}

TEST_P(PeerConnLimitTest, SlotIsFreeOnceTheConnectionEnds) {
  for (uint32_t i = 0; i < kCap; ++i) ASSERT_EQ(Hello("evil").value_or(-100), 0) << i;
  ASSERT_EQ(Hello("evil").value_or(-100), kNotAllowed);
  DropLast();
  held_.erase(held_.begin());  // closes one accepted connection
  // Its server thread notices the close promptly; until then "evil" is refused.
  const auto until = std::chrono::steady_clock::now() + 5s;
  std::optional<int32_t> st;
  while ((st = Hello("evil")) != 0 && std::chrono::steady_clock::now() < until) {
    DropLast();
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(st.value_or(-100), 0);
  EXPECT_EQ(Hello("evil").value_or(-100), kNotAllowed);  // and the cap holds again
}

TEST_P(PeerConnLimitTest, RefusedHelloTakesNoSlot) {
  core::Secret wrong = info_.meta.secret;
  wrong[0] ^= 1;
  for (uint32_t i = 0; i < kCap; ++i) {
    ASSERT_EQ(Hello("evil", &wrong).value_or(-100), kNotAllowed) << i;
    EXPECT_EQ(Last().last_refusal(), 0u);  // a bad proof, not the cap
  }
  for (uint32_t i = 0; i < kCap; ++i) EXPECT_EQ(Hello("evil").value_or(-100), 0) << i;
}

// The cap is the agent's, not each server's: connections over tcp and shm count
// together, so a peer cannot hold the cap on each of them.
TEST_P(PeerConnLimitTest, CapCountsEveryServerOfTheAgent) {
  const std::string other = GetParam() == "tcp" ? "shm" : "tcp";
  for (uint32_t i = 0; i < kCap; ++i)
    ASSERT_EQ(Hello("evil", nullptr, i % 2 == 0 ? GetParam() : other).value_or(-100), 0) << i;
  for (const std::string& transport : {GetParam(), other}) {
    ASSERT_EQ(Hello("evil", nullptr, transport).value_or(-100), kNotAllowed) << transport;
    EXPECT_EQ(Last().last_refusal(), kConnLimit) << transport;
    DropLast();
  }
  EXPECT_EQ(Hello("other", nullptr, other).value_or(-100), 0);
}

INSTANTIATE_TEST_SUITE_P(Transports, PeerConnLimitTest, ::testing::Values("tcp", "shm"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace kvlane::test
