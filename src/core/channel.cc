#include "core/channel.h"

#include "core/request.h"

namespace kvlane::core {

Channel::Channel(int lanes, uint32_t ring_slots, Completer* completer) : completer_(completer) {
  for (int i = 0; i < lanes; ++i) queues_.push_back(std::make_unique<LaneQueue>(ring_slots));
}

uint64_t ChunkBytes(const WorkItem& w) {
  uint64_t bytes = 0;
  for (uint32_t c = w.chunk; c < w.chunk + w.count; ++c) bytes += w.req->chunks[c].bytes;
  return bytes;
}

bool Channel::BeginChunk(const WorkItem& w) {
  uint32_t prev = w.req->ctl.fetch_add(1, std::memory_order_acq_rel);
  return (prev & kCanceledBit) == 0;
}

void Channel::UnbeginChunk(const WorkItem& w) {
  w.req->ctl.fetch_sub(1, std::memory_order_acq_rel);
}

void Channel::RetireHead(int lane, const Status& s) {
  LaneQueue& q = *queues_[lane];
  const WorkItem w = *q.PeekRetire();
  const uint64_t bytes = ChunkBytes(w);  // before the caller may free the request
  completer_->FinishChunk(w, s);  // publishes first: the slot is freed off the completion path
  q.TakeBytes(bytes);
  q.AdvanceRetire();  // the slot may be reused from here on
}

void Channel::DrainLane(int lane, const Status& s) {
  LaneQueue& q = *queues_[lane];
  while (q.HasUnretired()) RetireHead(lane, s);
  while (q.PeekIssue() != nullptr) {
    q.AdvanceIssue();
    RetireHead(lane, s);
  }
}

void Channel::BeginClose() {
  closing_.store(true, std::memory_order_release);
  for (auto& q : queues_) q->Wake();
}

WorkItem Channel::TakeDirect(int lane, uint64_t bytes) {
  LaneQueue& q = *queues_[lane];
  const WorkItem w = *q.PeekRetire();
  q.TakeBytes(bytes);
  q.AdvanceRetire();
  return w;
}

void Channel::SettleDirect(const WorkItem& w) { completer_->Settle(w.req, w.gen); }

bool Channel::direct_publication() const { return completer_->policy() == ProgressPolicy::kIndependent; }

}  // namespace kvlane::core
