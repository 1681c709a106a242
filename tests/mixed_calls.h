// A seeded random mix of the engine's calls, from several threads at once, on
// each transport (tests/mixed_calls_test.cc; the cuda transport in
// tests/gpu/cuda_mixed_calls_test.cc): posts of READs and WRITEs over random page pairings, Check
// and Wait, Cancel, Release and remake, notifications, and regions
// deregistered under the transfers (local ones while posts are in flight).
// Every thread owns regions of its own on both agents, so each outcome has one
// right answer, and every byte of both sides is checked against a shadow copy
// after every terminal answer:
// - kOk: each destination page holds its source page, and no other page of the
//   transfer's group changed;
// - kCanceled (Cancel said kOk): nothing moved;
// - a remote region the peer deregistered: kRemoteStale, nothing moved;
// - a terminal answer never changes until the handle is posted again, and a
//   released handle reads kNotFound;
// - a notification arrives once for each finished notified WRITE, never for a
//   canceled one, and its WRITE's bytes are in place when it is taken;
// - DeregisterMemory returns only once no post is in flight on the region.
// KVLANE_MIX_SEED and KVLANE_MIX_SECONDS (default 42 and 3) change the mix
// and its length; a failure prints the seed.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "kvlane/kvlane.h"

namespace kvlane::test {

inline constexpr uint32_t kMixPages = 64;  // per worker and side: 4 groups of 16
inline constexpr uint32_t kMixPage = 4096;

// One side's pages of one worker (kMixPages of kMixPage bytes, registered
// whole): host memory here, device memory in the GPU variant.
class PageStore {
 public:
  virtual ~PageStore() = default;
  virtual uint8_t* base() = 0;
  virtual MemoryKind kind() const = 0;
  virtual int32_t device() const { return 0; }
  // Copy one page in or out; the bytes are in place when they return.
  virtual void Put(uint32_t page, const uint8_t* bytes) = 0;
  virtual void Get(uint32_t page, uint8_t* out) = 0;
};
// The store of worker `worker`'s local (initiator's) or remote (peer's) pages.
using PageStoreMaker = std::function<std::unique_ptr<PageStore>(uint32_t worker, bool remote)>;

class HostPages final : public PageStore {
 public:
  HostPages();
  uint8_t* base() override { return bytes_.data(); }
  MemoryKind kind() const override { return MemoryKind::kHost; }
  void Put(uint32_t page, const uint8_t* bytes) override;
  void Get(uint32_t page, uint8_t* out) override;

 private:
  std::vector<uint8_t> bytes_;
};

// What the workers did, so that a test can require every case to be reached.
struct MixTally {
  std::atomic<uint64_t> ok{0}, canceled{0}, cancel_refused{0}, remade{0}, local_churn{0},
      remote_churn{0};
  std::atomic<uint64_t> deregistered_in_flight{0};  // posts in flight as their region went
  uint64_t notifications = 0;                       // checked as they were taken
  bool failed = false;                              // a failure was reported
};

// Small chunks over three lanes: most transfers are several chunks, striped,
// so a Cancel often finds some of them started (kNotAllowed) and one post's
// completions come from several lanes.
AgentOptions MixedCallsOptions();

// Runs the mix with `a` posting to `b` (loaded as "b"), for
// KVLANE_MIX_SECONDS; failures are reported through gtest. The workers'
// regions are deregistered and their stores freed before it returns.
void RunMixedCalls(Agent& a, Agent& b, const PageStoreMaker& make, MixTally& tally);

}  // namespace kvlane::test
