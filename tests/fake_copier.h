// A DeviceCopier for CPU machines: "device" memory is host memory registered
// as kCuda; copies run with memcpy at Wait (as cudaMemcpyAsync's run on their
// stream), are counted, and fail on demand. For tests of tcp's staging.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <vector>

#include "core/device_copier.h"

namespace kvlane::test {

using core::DeviceCopier;

// Small halves: a 64 KiB transfer crosses many windows.
constexpr size_t kFakeHalf = 4096;

struct FakeCounters {
  std::atomic<uint64_t> to_host{0}, to_device{0}, copiers{0};
  std::atomic<int64_t> pending{0};         // copies queued and not yet run by a Wait
  // Waits that found copies never started by a Flush: a window not flushed
  // once queued copies only when the caller waits (no overlap with the wire).
  std::atomic<uint64_t> unflushed_waits{0};
  std::atomic<int> fail_copies_after{-1};  // copies queued before every later one fails (-1: never)
  std::atomic<int> fail_waits_after{-1};   // the same for Waits that ran copies
  std::atomic<bool> fail_make{false};
};

// Fails once the budget `left` (-1: unlimited) is spent.
inline Status Spend(std::atomic<int>& left) {
  int n = left.load();
  while (n >= 0) {
    if (n == 0) return Status::Backend("fake device copy failed");
    if (left.compare_exchange_weak(n, n - 1)) break;
  }
  return Status::Ok();
}

// Copies run at Wait, as cudaMemcpyAsync's run on their stream: a half sent or
// refilled before its copies finished shows up as wrong bytes, and a copy left
// queued after a post ended shows up in `pending`.
class FakeCopier final : public DeviceCopier {
 public:
  explicit FakeCopier(FakeCounters& c) : c_(c), buf_(2 * kFakeHalf, 0xEE) {}
  ~FakeCopier() override { EXPECT_TRUE(q_[0].empty() && q_[1].empty()); }
  size_t capacity() const override { return kFakeHalf; }
  uint8_t* half(int h) override { return buf_.data() + h * kFakeHalf; }
  Status ToHost(int h, size_t at, const void* src, size_t len) override {
    EXPECT_LE(at + len, kFakeHalf);
    KVLANE_RETURN_IF_ERROR(Spend(c_.fail_copies_after));
    Push(h, half(h) + at, src, len);
    c_.to_host += len;
    return Status::Ok();
  }
  Status ToDevice(int h, size_t at, void* dst, size_t len) override {
    EXPECT_LE(at + len, kFakeHalf);
    KVLANE_RETURN_IF_ERROR(Spend(c_.fail_copies_after));
    Push(h, dst, half(h) + at, len);
    c_.to_device += len;
    return Status::Ok();
  }
  Status Flush(int h) override {
    flushed_[h] = q_[h].size();
    return Status::Ok();
  }
  Status Wait(int h) override {
    if (flushed_[h] != q_[h].size()) ++c_.unflushed_waits;
    flushed_[h] = 0;
    if (q_[h].empty()) return Status::Ok();
    for (const Copy& c : q_[h]) std::memcpy(c.dst, c.src, c.len);
    c_.pending -= static_cast<int64_t>(q_[h].size());
    q_[h].clear();
    return Spend(c_.fail_waits_after);
  }

 private:
  struct Copy {
    void* dst;
    const void* src;
    size_t len;
  };
  void Push(int h, void* dst, const void* src, size_t len) {
    q_[h].push_back({dst, src, len});
    ++c_.pending;
  }
  FakeCounters& c_;
  std::vector<uint8_t> buf_;
  std::vector<Copy> q_[kHalves];
  size_t flushed_[kHalves] = {};  // copies of q_[h] a Flush started
};

class FakeStaging final : public core::DeviceStaging {
 public:
  Result<std::unique_ptr<DeviceCopier>> MakeCopier(const void* first, StagingCopy) override {
    EXPECT_NE(first, nullptr);
    if (counters.fail_make) return Status::Backend("fake: cannot allocate staging");
    ++counters.copiers;
    return std::unique_ptr<DeviceCopier>(new FakeCopier(counters));
  }
  FakeCounters counters;
};

}  // namespace kvlane::test
