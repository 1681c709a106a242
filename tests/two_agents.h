// The base fixture of the engine tests that run one pair of agents, "a" and
// "b", in this process on the transport named by the test parameter.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "test_util.h"

namespace kvlane::test {

class TwoAgents : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { MakeAgents(); }
  // The agents go first: buffers a derived fixture owns outlive every engine
  // thread that could still touch them (a target's server may be returning
  // from the send of a READ reply the initiator already saw).
  void TearDown() override { pair_ = Pair{}; }

  // Replaces the pair with one made from `o`. With `connect`, a loads b's
  // metadata at once; without, the test calls Connect(a(), b()) itself once b's
  // memory is registered. Callers other than SetUp wrap it in
  // ASSERT_NO_FATAL_FAILURE when they go on after a failure.
  void MakeAgents(AgentOptions o = {}, bool connect = true) {
    pair_ = MakePair(GetParam(), std::move(o));
    ASSERT_TRUE(pair_.a && pair_.b);
    if (connect) Connect(a(), b());
  }
  Agent& a() { return *pair_.a; }
  Agent& b() { return *pair_.b; }

  Buffers bufs_;  // before pair_: outlives the agents
  Pair pair_;
};

}  // namespace kvlane::test
