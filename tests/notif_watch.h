// NotifWatch: mixed_calls_test's watch over one agent's notifications. A worker
// registers how to check what a notified WRITE must have put in place before
// it posts (Expect); a thread takes the agent's notifications as they come and checks
// those bytes at once (a notification that overtook its data fails when the
// check runs before the data lands). The
// worker then settles the post (Settle): it waits for the notification of a
// post that finished, and makes sure none came for a canceled one.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kvlane/kvlane.h"

namespace kvlane::test {

class NotifWatch {
 public:
  // Starts taking `agent`'s notifications. The agent outlives this object's Stop().
  explicit NotifWatch(Agent& agent);
  ~NotifWatch() { Stop(); }

  // The notification bytes of worker `worker`'s handle for group `group`.
  static std::string Name(uint32_t worker, uint32_t group);

  // The next notification `name` must find `in_place()` true when it is
  // taken (it reads the WRITE's destination). REQUIRES: no earlier
  // expectation of `name` is unsettled; the caller keeps that memory
  // unchanged until Settle.
  void Expect(const std::string& name, std::function<bool()> in_place);
  // `delivered`: waits up to `timeout` for the notification and returns what
  // its check found. Not delivered (a canceled post): an error if it came.
  Status Settle(const std::string& name, bool delivered, std::chrono::nanoseconds timeout);

  // Ends the watch; a notification nobody expected (a duplicate, or one of a
  // canceled post) has then been reported as a failure.
  void Stop();
  void Fail() { failed_.store(true); }
  bool failed() const { return failed_.load(); }
  uint64_t checked() const { return checked_.load(); }

 private:
  enum class State { kPending, kArrived, kWrongBytes };
  struct Expectation {
    std::function<bool()> in_place;
    State state = State::kPending;
  };
  void Loop();
  void OnArrival(const std::string& name);

  Agent& agent_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Expectation> expected_;  // GUARDED_BY(mu_)
  std::atomic<bool> stop_{false}, failed_{false};
  std::atomic<uint64_t> checked_{0};
  std::thread thread_;
};

}  // namespace kvlane::test
