// RowRunner against a target the test plays itself: two ranks opened in one process
// over tcp, the test answering the initiator's control messages on the target's
// connection as it chooses (a malformed "stopped", a row that fails at once).
#include "row_runner.h"

#include <gtest/gtest.h>

#include <future>
#include <string>
#include <vector>

#include "pattern.h"
#include "session_pair.h"

namespace kvbench {
namespace {

using nlohmann::json;

// The next message that is not "busy"; {"type": "(error)"} when none came.
json NextNotBusy(ControlChannel* c) {
  while (true) {
    auto m = c->Receive();
    if (!m.ok()) return {{"type", "(error)"}, {"why", m.status().message()}};
    if ((*m)["type"] != "busy") return *m;
  }
}

testing::SessionPair OneRow(const std::string& op) {
  const std::vector<std::string> flags = {"--transport", "tcp", "--ops",    op, "--warmup", "0",
                                          "--samples",   "1",   "--trials", "1"};
  return testing::OpenBoth(flags, flags);
}

testing::SessionPair OnePullRow() { return OneRow("pull"); }

// The target stops at the row with `stopped` ({"type": "stopped", ...}), then answers
// the abandon and the done. The initiator's result; the messages the target got.
RunResult StoppedByTheTarget(const json& stopped, std::vector<std::string>* got) {
  testing::SessionPair pair = OnePullRow();
  EXPECT_TRUE(pair.target.ok() && pair.initiator.ok());
  if (!pair.target.ok() || !pair.initiator.ok()) return {};
  ControlChannel* c = &pair.target.value()->control();
  auto target = std::async(std::launch::async, [c, stopped, got] {
    got->push_back(NextNotBusy(c)["type"]);  // "row"
    (void)c->Send(stopped);
    got->push_back(NextNotBusy(c)["type"]);  // "abandon"
    (void)c->Send({{"type", "abandoned"}});
    got->push_back(NextNotBusy(c)["type"]);  // "done"
    (void)c->Send({{"type", "bye"}});
  });
  RunResult result;
  {
    RowRunner runner(pair.initiator.value().get());
    EXPECT_NO_THROW(result = runner.RunAll([](const RunResult&) {}));
  }
  target.get();
  return result;
}

// The finding: a "stopped" whose "signal" was no string ({"signal": 5}) threw out of
// RowRunner (json::type_error), ending the rank without its document. It reads as
// "a stop signal"; a string is kept as plain text, cut to 32 bytes.
TEST(RowRunner, APeersStopSignalIsReadAsUntrusted) {
  std::vector<std::string> got;
  RunResult r = StoppedByTheTarget({{"type", "stopped"}, {"signal", 5}}, &got);
  EXPECT_EQ(got, (std::vector<std::string>{"row", "abandon", "done"}));
  EXPECT_EQ(r.stopped_by, "a stop signal");
  EXPECT_EQ(r.stopped_rank, "target");
  EXPECT_TRUE(r.rows.empty());
  EXPECT_TRUE(r.errors.empty()) << r.errors.front();

  got.clear();
  r = StoppedByTheTarget(
      {{"type", "stopped"}, {"signal", "SIG\x1b[2J\nTERM" + std::string(100, 'x')}}, &got);
  EXPECT_EQ(got, (std::vector<std::string>{"row", "abandon", "done"}));
  EXPECT_EQ(r.stopped_by, "SIG?[2J?TERM" + std::string(20, 'x') + "...");
}

// The finding: the checkpoint after a row (the progress call) was written before the
// initiator told the target "busy", so a slow write ate into the target's control
// timeout. The target is told "busy" just before each progress call: here the call
// waits until the target has it.
TEST(RowRunner, TheTargetIsToldBusyBeforeEachProgressCall) {
  testing::SessionPair pair = OnePullRow();
  ASSERT_TRUE(pair.target.ok() && pair.initiator.ok());
  ControlChannel* c = &pair.target.value()->control();
  std::promise<bool> busy;
  std::future<bool> told = busy.get_future();
  auto target = std::async(std::launch::async, [c, &busy] {
    EXPECT_EQ(NextNotBusy(c)["type"], "row");
    (void)c->Send({{"type", "ready"}});  // without filling its pool: the row fails
    EXPECT_EQ(NextNotBusy(c)["type"], "check");
    (void)c->Send({{"type", "verdict"}, {"local", "fail"}, {"detail", "the test's target"}});
    auto next = c->Receive();  // the row is over: the initiator's next message
    busy.set_value(next.ok() && (*next)["type"] == "busy");
    if (!next.ok() || (*next)["type"] != "done") EXPECT_EQ(NextNotBusy(c)["type"], "done");
    (void)c->Send({{"type", "bye"}});
  });
  bool busy_first = false;
  RunResult result;
  {
    RowRunner runner(pair.initiator.value().get());
    result = runner.RunAll([&](const RunResult&) {
      busy_first =
          told.wait_for(std::chrono::seconds(10)) == std::future_status::ready && told.get();
    });
  }
  target.get();
  EXPECT_TRUE(busy_first) << "the target got no \"busy\" before the progress call";
  ASSERT_EQ(result.rows.size(), 1u);
  EXPECT_EQ(result.rows[0].verdict, Verdict::kFail);
  EXPECT_NE(result.rows[0].verify_detail.find("the test's target"), std::string::npos)
      << result.rows[0].verify_detail;
}

// The row's second check (its last timed burst) is a second "row" exchange, with
// the row's epoch and bit 63 set. A stop the target tells there drops the row
// (never kept half-checked) and the ranks part as after a stop in the first:
// abandon, done.
TEST(RowRunner, AStopInTheSecondCheckDropsTheRow) {
  testing::SessionPair pair = OneRow("push");  // the target checks: the test's says pass
  ASSERT_TRUE(pair.target.ok() && pair.initiator.ok());
  ControlChannel* c = &pair.target.value()->control();
  std::vector<std::string> got;
  std::vector<uint64_t> epochs;
  auto target = std::async(std::launch::async, [c, &got, &epochs] {
    json row = NextNotBusy(c);
    got.push_back(row["type"]);
    epochs.push_back(row.value("epoch", uint64_t{0}));
    (void)c->Send({{"type", "ready"}});
    got.push_back(NextNotBusy(c)["type"]);  // "check"
    (void)c->Send({{"type", "verdict"}, {"local", "pass"}, {"detail", "first"}});
    row = NextNotBusy(c);
    got.push_back(row["type"]);
    epochs.push_back(row.value("epoch", uint64_t{0}));
    (void)c->Send({{"type", "stopped"}, {"signal", "SIGTERM"}});
    got.push_back(NextNotBusy(c)["type"]);  // "abandon"
    (void)c->Send({{"type", "abandoned"}});
    got.push_back(NextNotBusy(c)["type"]);  // "done"
    (void)c->Send({{"type", "bye"}});
  });
  RunResult result;
  {
    RowRunner runner(pair.initiator.value().get());
    result = runner.RunAll([](const RunResult&) {});
  }
  target.get();
  EXPECT_EQ(got, (std::vector<std::string>{"row", "check", "row", "abandon", "done"}));
  ASSERT_EQ(epochs.size(), 2u);
  EXPECT_EQ(epochs[1], LastBurstEpoch(epochs[0]));
  EXPECT_NE(epochs[0], epochs[1]);
  EXPECT_TRUE(result.rows.empty()) << "a row half-checked was kept";
  EXPECT_EQ(result.stopped_by, "SIGTERM");
  EXPECT_EQ(result.stopped_rank, "target");
}

}  // namespace
}  // namespace kvbench
