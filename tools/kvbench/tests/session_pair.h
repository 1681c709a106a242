// Two ranks' Session::Open in one process (the target on a thread of its own)
// over a loopback control connection, each with its own flags. Header-only; for
// the session tests (CPU) and the device-pool ones (gpu).
#pragma once

#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <future>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "control_channel.h"
#include "loopback_listener.h"
#include "session.h"

namespace kvbench::testing {

using SessionOrError = kvlane::Result<std::unique_ptr<Session>>;

struct SessionPair {
  SessionOrError target;
  SessionOrError initiator;
};

// The config of `rank` from `flags` plus, unless they give them, a one-row grid
// (--isl 8192 --batches 1), a short timeout and a small pool budget.
inline RunConfig RankConfig(int rank, const std::string& peer, std::vector<std::string> flags) {
  auto given = [&flags](const std::string& f) {
    return std::find(flags.begin(), flags.end(), f) != flags.end();
  };
  flags.insert(flags.end(), {"--rank", std::to_string(rank), "--peer", peer});
  for (const auto& [flag, value] :
       std::vector<std::pair<std::string, std::string>>{{"--control-timeout", "20s"},
                                                        {"--isl", "8192"},
                                                        {"--batches", "1"},
                                                        {"--pool-budget", "1GiB"}}) {
    if (!given(flag)) flags.insert(flags.end(), {flag, value});
  }
  unsetenv("KVBENCH_SECRET_FILE");  // a developer's own would change every test's handshake
  RunConfig c;
  CLI::App app;
  AddRunFlags(&app, &c);
  std::reverse(flags.begin(), flags.end());  // CLI11 parses a reversed vector
  app.parse(flags);
  EXPECT_TRUE(c.Resolve().ok());
  return c;
}

// RankConfig of rank 0 listening on `l`'s socket, handed over (its session
// closes it).
inline RunConfig RankZeroOn(LoopbackListener& l, std::vector<std::string> flags) {
  RunConfig c = RankConfig(0, l.peer, std::move(flags));
  c.listen_fd = l.HandOver();
  return c;
}

inline SessionPair OpenBoth(const std::vector<std::string>& target_flags,
                            const std::vector<std::string>& initiator_flags) {
  LoopbackListener l = ListenOnLoopback();
  RunConfig target_config = RankZeroOn(l, target_flags);
  auto target = std::async(std::launch::async, [&] { return Session::Open(target_config); });
  SessionOrError initiator = Session::Open(RankConfig(1, l.peer, initiator_flags));
  return {target.get(), std::move(initiator)};
}

}  // namespace kvbench::testing
