#include "core/channel.h"

#include "core/request.h"

namespace kvlane::core {

Channel::Channel(int lanes, uint32_t ring_slots, Completer* completer) : completer_(completer) {
  for (int i = 0; i < lanes; ++i) queues_.push_back(std::make_unique<LaneQueue>(ring_slots));
}

uint64_t ChunkBytes(const WorkItem& w) { return w.req->chunks[w.chunk].bytes; }

bool Channel::BeginChunk(const WorkItem& w) {
  uint32_t prev = w.req->ctl.fetch_add(1, std::memory_order_acq_rel);
  return (prev & kCanceledBit) == 0;
}

void Channel::RetireHead(int lane, const Status& s) {
  LaneQueue& q = *queues_[lane];
  WorkItem w = *q.PeekRetire();
  q.AddBytes(-static_cast<int64_t>(ChunkBytes(w)));
  q.AdvanceRetire();  // the slot may be reused from here on; w is a copy
  completer_->FinishChunk(w, s);
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

}  // namespace kvlane::core
