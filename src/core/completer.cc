#include "core/completer.h"

#include <thread>

#include "core/backoff.h"
#include "core/channel.h"

namespace kvlane::core {

void Request::SetError(const Status& s) {
  int32_t expected = 0;
  if (error.compare_exchange_strong(expected, static_cast<int32_t>(s.code()),
                                    std::memory_order_acq_rel)) {
    std::lock_guard lock(error_mu);
    error_message = s.message();  // Check reads it once the record is published
  }
}

// A post its lane gave up on while the GPU held it (poisoned before the
// lane's last look at the record) may get {gen, ok} from the GPU at any time,
// also over the error the lane publishes. The lane decides: the record landed
// before that look (it lets the poison go: ok), or not (it sets the error,
// which stands). Between the poison and that decision, a few instructions of
// the lane's retire thread, this waits for it, so a post read ok once never
// reads an error afterwards.
Code Request::PoisonedOutcome(uint32_t gen) const {
  for (uint32_t n = 0;; ++n) {
    // Acquire pairs with the lane's release of the poison or SetError.
    const auto c = static_cast<Code>(error.load(std::memory_order_acquire));
    if (c != Code::kOk || !poisoned.load(std::memory_order_acquire)) return c;
    if (RecordGen(record.load(std::memory_order_acquire)) != gen) return Code::kNotFound;
    if (n >= 64) std::this_thread::yield();
  }
}

bool Request::AwaitOffRegions(std::span<const uint64_t> sorted_keys) const {
  while (posting.load(std::memory_order_seq_cst)) std::this_thread::yield();  // a lookup
  const uint64_t w = record.load(std::memory_order_seq_cst);
  const bool live = RecordCode(w) == Code::kInProgress || poisoned.load(std::memory_order_acquire);
  if (!live || !UsesAnyOf(sorted_keys)) return false;
  // No deadline: a post ends by itself (it completes, or its lane fails after
  // io_timeout without progress).
  if (RecordCode(w) == Code::kInProgress) {
    for (Backoff backoff; record.load(std::memory_order_acquire) == w;) backoff.Nap();
  }
  if (poisoned.load(std::memory_order_acquire))
    (void)PoisonedOutcome(RecordGen(record.load(std::memory_order_acquire)));
  return poisoned.load(std::memory_order_acquire);
}

Completer::Completer(ProgressPolicy policy, uint32_t max_requests)
    : policy_(policy), order_(policy == ProgressPolicy::kGlobalFifo ? max_requests : 0) {}

void Completer::OnPost(Request* r) {
  if (policy_ != ProgressPolicy::kGlobalFifo) return;
  std::lock_guard lock(order_mu_);
  r->seq = order_tail_++;
  r->done_unpublished.store(false, std::memory_order_relaxed);
  order_[r->seq % order_.size()] = r;
}

void Completer::FinishChunk(const WorkItem& w, const Status& s) {
  if (s.is_error()) w.req->SetError(s);
  DropPending(w.req, w.count);
}

void Completer::DropPending(Request* r, int64_t n) {
  if (n == 0) return;
  // acq_rel: the last dropper sees every other lane's writes to the request.
  if (r->pending.fetch_sub(n, std::memory_order_acq_rel) != n) return;
  // This post's lanes are done with it (a lane may still hold an older post a
  // device published: Settle never moves backwards).
  r->settled.store(r->gen, std::memory_order_release);
  Done(r);
}

void Completer::Settle(Request* r, uint32_t gen) {
  // Never backwards: the owner may have posted again without waiting for this
  // lane (AgentImpl::Post), and that post may have settled first on another.
  uint32_t cur = r->settled.load(std::memory_order_relaxed);
  while (static_cast<int32_t>(gen - cur) > 0 &&
         !r->settled.compare_exchange_weak(cur, gen, std::memory_order_release,
                                           std::memory_order_relaxed)) {
  }
  WakeWaiters();  // Wait() sleepers: the device's record write woke nobody
}

void Completer::Done(Request* r) {
  if (r->error.load(std::memory_order_acquire) == 0 && !r->notif.empty()) {
    Status s = r->channel->Notify(r->notif);  // data is visible at the peer already
    if (s.is_error()) r->SetError(s);
  }
  if (policy_ == ProgressPolicy::kIndependent) {
    Publish(r);
    return;
  }
  std::lock_guard lock(order_mu_);
  r->done_unpublished.store(true, std::memory_order_relaxed);
  while (order_head_ < order_tail_) {
    Request* head = order_[order_head_ % order_.size()];
    if (!head->done_unpublished.load(std::memory_order_relaxed)) break;
    head->done_unpublished.store(false, std::memory_order_relaxed);
    ++order_head_;
    Publish(head);
  }
}

void Completer::Publish(Request* r) {
  int32_t err = r->error.load(std::memory_order_acquire);
  Code code = err == 0 ? Code::kOk : static_cast<Code>(err);
  // Release pairs with the acquire load in Check(): the transport is done with
  // the request's memory and error_message is written. Only a record still in
  // progress: a device may have published this post already (same outcome).
  uint64_t expect = PackRecord(r->gen, Code::kInProgress);
  r->record.compare_exchange_strong(expect, PackRecord(r->gen, code), std::memory_order_release,
                                    std::memory_order_relaxed);
  WakeWaiters();
}

void Completer::WakeWaiters() {
  std::atomic_thread_fence(std::memory_order_seq_cst);  // pairs with WaitPublished's increment
  if (waiters_.load(std::memory_order_relaxed) != 0) {
    std::lock_guard lock(wait_mu_);
    wait_cv_.notify_all();
  }
}

void Completer::WaitPublished(const std::atomic<uint64_t>& record, uint32_t gen,
                              std::chrono::steady_clock::time_point deadline) {
  auto terminal = [&] {
    uint64_t w = record.load(std::memory_order_acquire);
    return RecordGen(w) != gen || RecordCode(w) != Code::kInProgress;
  };
  std::unique_lock lock(wait_mu_);
  waiters_.fetch_add(1, std::memory_order_seq_cst);
  // Between the count and the record's first load, pairing with WakeWaiters'
  // fence between the record's store and its load of the count: either this
  // reads the record terminal or the publisher reads the count and notifies.
  // (The increment alone does not keep the acquire load below from being
  // satisfied before it on every architecture.)
  std::atomic_thread_fence(std::memory_order_seq_cst);
  while (!terminal()) {
    if (wait_cv_.wait_until(lock, deadline) == std::cv_status::timeout) break;
  }
  waiters_.fetch_sub(1, std::memory_order_relaxed);
}

}  // namespace kvlane::core
