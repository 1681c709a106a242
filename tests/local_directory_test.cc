// The process-wide directory of agents (transport/local/local_directory.h):
// an agent's local transport and its cuda transport both publish it; only the
// local transport's entry lets a local peer reach it through "local".
#include "transport/local/local_directory.h"

#include <gtest/gtest.h>

#include <memory>

#include "core/agent_impl.h"
#include "test_util.h"

namespace kvlane::core {
namespace {

constexpr uint64_t kId = 0x5eed'0001'0002'0003ull;  // no agent of this test binary has it

std::shared_ptr<LocalEndpoint> Endpoint(bool serves_local) {
  return std::make_shared<LocalEndpoint>(LocalEndpoint{"x", nullptr, nullptr, serves_local});
}

TEST(LocalDirectory, ACudaOnlyEntryDoesNotServeLocal) {
  PublishLocal(kId, Endpoint(false));
  auto ep = FindLocal(kId);
  ASSERT_NE(ep, nullptr);
  EXPECT_FALSE(ep->serves_local);
  UnpublishLocal(kId);
  EXPECT_EQ(FindLocal(kId), nullptr);
}

// Published by both transports, in either order: it serves local.
TEST(LocalDirectory, BothTransportsInEitherOrderServeLocal) {
  for (bool local_first : {true, false}) {
    PublishLocal(kId, Endpoint(local_first));
    PublishLocal(kId, Endpoint(!local_first));
    auto ep = FindLocal(kId);
    ASSERT_NE(ep, nullptr);
    EXPECT_TRUE(ep->serves_local) << (local_first ? "local first" : "cuda first");
    UnpublishLocal(kId);
    UnpublishLocal(kId);  // the second transport's Stop: nothing left to remove
    EXPECT_EQ(FindLocal(kId), nullptr);
  }
}

// The cuda transport's entry carries no secret: published after the local
// transport's, it leaves that entry, secret included, in place.
TEST(LocalDirectory, TheLocalTransportsEntryKeepsItsSecret) {
  for (bool local_first : {true, false}) {
    auto local = Endpoint(true);
    local->secret.fill(0x7e);
    PublishLocal(kId, local_first ? local : Endpoint(false));
    PublishLocal(kId, local_first ? Endpoint(false) : local);
    EXPECT_EQ(FindLocal(kId), local) << (local_first ? "local first" : "cuda first");
    UnpublishLocal(kId);
  }
}

// An agent of this process that did not enable "local" (here tcp only, with a
// cuda-style entry published for it) is not reached through local.
TEST(LocalDirectory, APeerWithoutLocalIsNotReachedThroughIt) {
  auto b = Agent::Create(test::OptionsFor("b", "tcp"));
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  const uint64_t id = b.value()->impl()->context().agent_id;
  PublishLocal(id, Endpoint(false));
  AgentOptions o = test::OptionsFor("a", "local");
  o.transports.push_back("tcp");
  auto a = Agent::Create(o);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  test::Connect(*a.value(), *b.value());
  auto via = a.value()->PeerTransport("b");
  UnpublishLocal(id);
  ASSERT_TRUE(via.ok()) << via.status().ToString();
  EXPECT_EQ(via.value(), "tcp");
}

}  // namespace
}  // namespace kvlane::core
