// The lanes of a CudaChannel: issue (batch, check, launch) and retire (poll the
// pinned completion word, retire FIFO).
#include <algorithm>
#include <thread>

#include "core/request.h"
#include "gpu/copy_launch.h"
#include "transport/cuda/cuda_channel.h"
#include "transport/cuda/cuda_check.h"

namespace kvlane::core {
namespace {

constexpr uint64_t kCopyEngineMinBytes = 256u << 10;  // contiguous runs this big use a copy engine
constexpr uint64_t kBytesPerBlock = 16u << 10;        // kernel grid: one block per 16 KiB
constexpr auto kGatherWait = std::chrono::microseconds(20);  // wait for a post's later chunks

void CpuRelax() {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#endif
}

// True when the core put every chunk of `r` on the lane of its first chunk.
bool WholeOnOneLane(const Request& r, uint64_t stripe_min) {
  return r.fixed_lane >= 0 || !r.stripe || r.total_bytes < stripe_min;
}

}  // namespace

void CudaChannel::IssueLoop(int i) {
  (void)cudaSetDevice(device_);  // this thread's launches and allocations go to the channel's GPU
  LaneQueue& q = queue(i);
  Lane& l = *lanes_[i];
  while (!closing().load(std::memory_order_acquire)) {
    if (q.PeekIssue() == nullptr) {
      q.WaitForIssue(spin_);
      continue;
    }
    if (l.issued.load(std::memory_order_relaxed) - l.retired.load(std::memory_order_acquire) >= kBatchRing) {
      std::this_thread::yield();  // every completion word is in use
      continue;
    }
    IssueBatch(i, false);
  }
  for (;;) {  // closing: what is still queued retires as canceled, in ticket order
    while (l.issued.load(std::memory_order_relaxed) - l.retired.load(std::memory_order_acquire) >= kBatchRing)
      std::this_thread::yield();
    if (q.PeekIssue() == nullptr) break;
    IssueBatch(i, true);
  }
  l.issuer_done.store(true, std::memory_order_release);
  l.bell.fetch_add(1, std::memory_order_release);
  l.bell.notify_all();
}

// Takes the head item and the consecutive chunks of the same post behind it,
// checks them and launches them as one batch.
void CudaChannel::IssueBatch(int i, bool closing) {
  LaneQueue& q = queue(i);
  Lane& l = *lanes_[i];
  WorkItem first = *q.PeekIssue();
  q.AdvanceIssue();
  Request* r = first.req;
  const bool started = BeginChunk(first);
  uint32_t last = first.chunk;
  uint64_t bytes = r->chunks[first.chunk].bytes;
  uint32_t items = 1;
  const bool wait_more = started && !closing && WholeOnOneLane(*r, stripe_min_bytes_);
  auto until = std::chrono::steady_clock::now() + kGatherWait;
  while (started && last + 1 < r->chunks.size()) {
    WorkItem* nx = q.PeekIssue();
    if (nx == nullptr) {
      if (!wait_more || std::chrono::steady_clock::now() > until) break;
      CpuRelax();
      continue;
    }
    if (nx->req != r || nx->gen != first.gen || nx->chunk != last + 1) break;
    (void)BeginChunk(*nx);  // cannot be canceled: the post already started
    q.AdvanceIssue();
    ++last, ++items;
    bytes += r->chunks[last].bytes;
  }
  const uint64_t seq = l.issued.load(std::memory_order_relaxed);
  Status s = !started ? Status::Canceled("canceled before a lane started it")
             : closing ? Status::Canceled("channel closed")
                       : latch().Get();
  l.issuing.store(true, std::memory_order_seq_cst);  // pairs with HandleRevoke
  bool launched = false;
  XferTable* t = nullptr;
  if (s.ok()) s = TableFor(r, &t);
  if (s.ok()) {
    for (const RemotePiece* p : t->pieces)
      if (p->revoked.load(std::memory_order_seq_cst)) {
        s = Status::RemoteStale("peer '" + peer_name_ + "' deregistered a region of this transfer");
        break;
      }
  }
  if (s.ok()) {
    s = Launch(l, *t, r->chunks[first.chunk].seg_begin, r->chunks[last].seg_end, bytes, seq);
    launched = s.ok();
    if (!s.ok()) latch().Latch(s);  // a CUDA error on a lane is fatal for the channel
  }
  Batch& b = l.batches[seq % kBatchRing];
  b.items = items;
  b.status = s;
  b.launched.store(launched, std::memory_order_release);
  l.issued.store(seq + 1, std::memory_order_release);
  l.issuing.store(false, std::memory_order_seq_cst);
  l.bell.fetch_add(1, std::memory_order_release);
  l.bell.notify_one();
}

Status CudaChannel::Launch(Lane& l, const XferTable& t, uint32_t sb, uint32_t se, uint64_t bytes,
                           uint64_t seq) {
  uint64_t* done = &l.done[seq % kBatchRing];
  const uint64_t value = seq + 1;
  if (t.contig_end[sb] >= se && bytes >= kCopyEngineMinBytes) {
    const gpu::CopySeg& g = t.host_segs[sb];
    KVLANE_CUDA(cudaMemcpyAsync(reinterpret_cast<void*>(g.dst), reinterpret_cast<const void*>(g.src),
                                bytes, cudaMemcpyDefault, l.ce));
    if (Driver().write_value64 != nullptr) {
      // Default flags: the write is fenced after the stream's earlier work.
      int rc = Driver().write_value64(l.ce, reinterpret_cast<unsigned long long>(done), value, 0);
      if (rc == 0) return Status::Ok();
    }
    KVLANE_CUDA(gpu::LaunchSignal(done, value, l.ce));
    return Status::Ok();
  }
  int blocks = static_cast<int>(std::clamp<uint64_t>(bytes / kBytesPerBlock, 1, max_blocks_));
  KVLANE_CUDA(gpu::LaunchCopySegments(t.segs, sb, se, blocks, {l.blocks_finished, done, value}, l.sm));
  return Status::Ok();
}

void CudaChannel::RetireLoop(int i) {
  (void)cudaSetDevice(device_);
  Lane& l = *lanes_[i];
  uint64_t seq = 0;
  for (;;) {
    uint32_t bell = l.bell.load(std::memory_order_acquire);
    if (seq == l.issued.load(std::memory_order_acquire)) {
      if (l.issuer_done.load(std::memory_order_acquire) && seq == l.issued.load(std::memory_order_acquire))
        break;
      auto until = std::chrono::steady_clock::now() + spin_;
      while (l.bell.load(std::memory_order_acquire) == bell && std::chrono::steady_clock::now() < until)
        CpuRelax();
      if (l.bell.load(std::memory_order_acquire) == bell) l.bell.wait(bell, std::memory_order_acquire);
      continue;
    }
    Batch& b = l.batches[seq % kBatchRing];
    Status s = b.launched.load(std::memory_order_acquire) ? WaitDone(l, seq) : b.status;
    for (uint32_t k = 0; k < b.items; ++k) RetireHead(i, s);
    l.retired.store(++seq, std::memory_order_release);
  }
}

// Polls the batch's pinned completion word. Every few thousand polls it asks the
// streams (non-blocking) whether the GPU hit an error, which then latches.
Status CudaChannel::WaitDone(Lane& l, uint64_t seq) {
  std::atomic_ref<uint64_t> word(l.done[seq % kBatchRing]);
  // Acquire pairs with the GPU's system fence before it stored the word: the
  // data is visible once the word is.
  for (uint32_t n = 1; word.load(std::memory_order_acquire) < seq + 1; ++n) {
    CpuRelax();
    if (n % 4096 != 0) continue;
    for (cudaStream_t st : {l.sm, l.ce}) {
      cudaError_t e = cudaStreamQuery(st);
      if (e != cudaSuccess && e != cudaErrorNotReady) {
        Status err = CudaStatus(e, "copy on a cuda lane", __FILE__, __LINE__);
        latch().Latch(err);
        return err;
      }
    }
    if (n % (1u << 20) == 0) std::this_thread::yield();
  }
  return Status::Ok();
}

}  // namespace kvlane::core
