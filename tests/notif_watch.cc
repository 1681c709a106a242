#include "notif_watch.h"

#include <gtest/gtest.h>

namespace kvlane::test {

NotifWatch::NotifWatch(Agent& agent) : agent_(agent), thread_([this] { Loop(); }) {}

std::string NotifWatch::Name(uint32_t worker, uint32_t group) {
  return "mix w" + std::to_string(worker) + " g" + std::to_string(group);
}

void NotifWatch::Expect(const std::string& name, std::function<bool()> in_place) {
  std::lock_guard lock(mu_);
  Expectation& e = expected_[name];
  e.in_place = std::move(in_place);
  e.state = State::kPending;
}

Status NotifWatch::Settle(const std::string& name, bool delivered,
                          std::chrono::nanoseconds timeout) {
  std::unique_lock lock(mu_);
  auto it = expected_.find(name);
  if (it == expected_.end()) return Status::NotFound("nothing was expected for '" + name + "'");
  if (delivered) cv_.wait_for(lock, timeout, [&] { return it->second.state != State::kPending; });
  const State st = it->second.state;
  expected_.erase(it);
  if (!delivered)
    return st == State::kPending ? Status::Ok()
                                 : Status::Backend("'" + name + "' arrived for a canceled post");
  if (st == State::kPending) return Status::Timeout("'" + name + "' never arrived");
  if (st == State::kWrongBytes)
    return Status::Backend("'" + name + "' arrived before its WRITE's bytes were in place");
  return Status::Ok();
}

void NotifWatch::OnArrival(const std::string& name) {
  std::lock_guard lock(mu_);
  auto it = expected_.find(name);
  if (it == expected_.end() || it->second.state != State::kPending) {
    ADD_FAILURE() << "notification '" << name
                  << "' came unexpected (a duplicate, or a canceled post's)";
    failed_.store(true);
    return;
  }
  Expectation& e = it->second;
  e.state = e.in_place() ? State::kArrived : State::kWrongBytes;
  checked_.fetch_add(1);
  cv_.notify_all();
}

void NotifWatch::Loop() {
  while (!stop_.load()) {
    auto got = agent_.TakeNotifications();
    for (const Notification& n : got) OnArrival(n.bytes);
    if (got.empty()) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

void NotifWatch::Stop() {
  if (!thread_.joinable()) return;
  stop_.store(true);
  thread_.join();
  for (const Notification& n : agent_.TakeNotifications()) OnArrival(n.bytes);
}

}  // namespace kvlane::test
