#include "transport/cuda/cuda_channel.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>
#include <unordered_set>

#include "core/random.h"
#include "core/start_thread.h"
#include "transport/cuda/cuda_check.h"
#include "transport/cuda/cuda_control.h"
#include "transport/local/local_directory.h"
#include "transport/notif_queue.h"

namespace kvlane::core {

CudaChannel::CudaChannel(const AgentContext& ctx, const AgentMeta& peer, int device, Fd control,
                         uint8_t* records)
    : Channel(ctx.options.lanes_per_peer, ctx.options.lane_ring_slots, ctx.completer),
      self_name_(ctx.name),
      peer_name_(peer.name),
      local_peer_(peer.process_token == ProcessToken() ? FindLocal(peer.agent_id) : nullptr),
      registry_(ctx.registry),
      device_(device),
      spin_(ctx.options.spin),
      io_timeout_(ctx.options.io_timeout),
      connect_timeout_(ctx.options.connect_timeout),
      proxy_blocks_(ctx.options.cuda_proxy_blocks),
      proxy_max_bytes_(ctx.options.cuda_proxy_max_bytes),
      proxy_idle_exit_(ctx.options.cuda_proxy_idle_exit),
      proxy_renew_every_(ctx.options.cuda_proxy_renew_every),
      records_(ctx.records != nullptr ? records : nullptr),
      record_slots_(ctx.records != nullptr ? ctx.records->slots() : 0),
      control_(std::move(control)) {}

Result<std::unique_ptr<Channel>> CudaChannel::Open(const AgentContext& ctx, const AgentMeta& peer,
                                                   int device, Fd control, uint8_t* records) {
  std::unique_ptr<CudaChannel> ch(new CudaChannel(ctx, peer, device, std::move(control), records));
  Status s = ch->CreateLanes();
  if (s.ok()) s = ch->CheckLiveKeys(peer);
  if (!s.ok()) {
    ch->DestroyGpu();
    return s;
  }
  // Each lane's issuer before its retirer: a retirer ends only after its
  // issuer did (RetireLoop), so one whose issuer could not start would hold
  // Close. Nothing was posted yet: a lane left without threads is only closed.
  KVLANE_RETURN_IF_ERROR(
      StartThread(&ch->control_thread_, "cuda control", [p = ch.get()] { p->ControlLoop(); }));
  for (int i = 0; i < ch->lane_count(); ++i) {
    Lane& l = *ch->lanes_[i];
    KVLANE_RETURN_IF_ERROR(
        StartThread(&l.issuer, "cuda lane issuer", [p = ch.get(), i] { p->IssueLoop(i); }));
    KVLANE_RETURN_IF_ERROR(
        StartThread(&l.retirer, "cuda lane retirer", [p = ch.get(), i] { p->RetireLoop(i); }));
  }
  return std::unique_ptr<Channel>(std::move(ch));
}

Status CudaChannel::CreateLanes() {
  DeviceGuard guard(device_);
  KVLANE_CUDA(cudaSetDevice(device_));
  int sms = 0, lo = 0, hi = 0;
  KVLANE_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device_));
  max_blocks_ = 4 * sms;
  KVLANE_CUDA(cudaDeviceGetStreamPriorityRange(&lo, &hi));
  KVLANE_CUDA(cudaStreamCreateWithFlags(&build_stream_, cudaStreamNonBlocking));
  for (int i = 0; i < lane_count(); ++i) {
    auto l = std::make_unique<Lane>();
    lanes_.push_back(std::move(l));
    Lane& lane = *lanes_.back();
    KVLANE_CUDA(cudaStreamCreateWithPriority(&lane.sm, cudaStreamNonBlocking, hi));
    KVLANE_CUDA(cudaStreamCreateWithPriority(&lane.ce, cudaStreamNonBlocking, lo));
    KVLANE_CUDA(cudaMalloc(reinterpret_cast<void**>(&lane.blocks_finished), sizeof(uint32_t)));
    KVLANE_CUDA(cudaMemset(lane.blocks_finished, 0, sizeof(uint32_t)));
    KVLANE_CUDA(cudaHostAlloc(reinterpret_cast<void**>(&lane.done), kBatchRing * sizeof(uint64_t),
                              cudaHostAllocMapped | cudaHostAllocPortable));
    std::memset(lane.done, 0, kBatchRing * sizeof(uint64_t));
    // A kernel leaves on its own after twice the renewal period (or the idle
    // exit without renewal), so that nothing that holds back launches (a
    // caller's cudaFree) waits for it longer.
    const auto max_life = std::max<std::chrono::microseconds>(
        std::chrono::milliseconds(1), 2 * (proxy_renew_every_.count() > 0 ? proxy_renew_every_ : proxy_idle_exit_));
    if (proxy_blocks_ > 0)
      KVLANE_RETURN_IF_ERROR(
          lane.proxy.Init(proxy_blocks_, lane.done, hi, proxy_renew_every_, max_life, records_, record_slots_));
  }
  {
    std::lock_guard lock(free_order_->mu);
    KVLANE_CUDA(cudaStreamCreateWithFlags(&free_order_->stream, cudaStreamNonBlocking));
    KVLANE_CUDA(cudaEventCreateWithFlags(&free_order_->event, cudaEventDisableTiming));
    for (auto& l : lanes_) free_order_->lanes.push_back(l->sm);
  }
  KVLANE_CUDA(cudaDeviceSynchronize());
  return Status::Ok();
}

// Stops the proxies (bounded wait), then frees what the lanes hold. After a
// wedged GPU nothing is freed: freeing would block on the device, and the GPU
// may still write the completion words.
void CudaChannel::DestroyGpu() {
  DeviceGuard guard(device_);
  for (auto& l : lanes_) {
    Status s = l->proxy.Shutdown(io_timeout_);
    if (s.code() == Code::kTimeout) wedged_ = true;
    if (!s.ok()) latch().Latch(s);
    wedged_ = wedged_ || l->wedged;
  }
  if (wedged_) {
    for (auto& l : lanes_) (void)l.release();  // leaked on purpose, see above
    lanes_.clear();
    std::lock_guard lock(build_mu_);  // peer memory stays mapped too
    for (auto& [span, v] : vmm_) (void)v.mapping.release();
    for (auto& m : retired_vmm_) (void)m.release();
    retired_legacy_.clear();  // left open, as above
    (void)cudaGetLastError();
    return;
  }
  // Once the lanes' streams are synchronized (their threads are joined: nothing
  // launches now), a table freed later follows every launch already; those
  // freed before are queued on the free stream. Synchronized outside the lock,
  // which a Release on another thread may be waiting for meanwhile.
  for (auto& l : lanes_)
    if (l->sm) (void)cudaStreamSynchronize(l->sm);
  {
    std::lock_guard lock(free_order_->mu);
    free_order_->lanes.clear();
    if (free_order_->stream)
      (void)cudaStreamSynchronize(free_order_->stream),
          (void)cudaStreamDestroy(free_order_->stream);
    if (free_order_->event) (void)cudaEventDestroy(free_order_->event);
    free_order_->stream = nullptr;
    free_order_->event = nullptr;
  }
  for (auto& l : lanes_) {  // each pointer cleared: a second call frees nothing again
    if (l->sm) (void)cudaStreamDestroy(l->sm);  // synchronized above
    if (l->ce) (void)cudaStreamSynchronize(l->ce), (void)cudaStreamDestroy(l->ce);
    if (l->blocks_finished) (void)cudaFree(l->blocks_finished);
    l->proxy.Free();
    if (l->done) (void)cudaFreeHost(l->done);
    l->sm = nullptr, l->ce = nullptr, l->blocks_finished = nullptr, l->done = nullptr;
  }
  std::lock_guard lock(build_mu_);
  if (build_stream_) (void)cudaStreamDestroy(build_stream_), build_stream_ = nullptr;
  for (auto& [handle, m] : opened_) (void)cudaIpcCloseMemHandle(m.ptr);
  opened_.clear();
  for (void* p : retired_legacy_) (void)cudaIpcCloseMemHandle(p);
  retired_legacy_.clear();
  vmm_.clear();  // unmaps and frees the address ranges
  retired_vmm_.clear();
  (void)cudaGetLastError();
}

// Runs before the control thread starts, so it reads the control connection
// itself; a revocation that arrives meanwhile is handled as that thread would.
// One deadline for all of it: a peer that keeps sending revocations and never
// answers cannot hold the connect (and the peer's refresh_mu) past it.
Status CudaChannel::CheckLiveKeys(const AgentMeta& peer) {
  std::vector<uint64_t> keys;
  for (const Piece& p : peer.pieces) keys.push_back(p.key);
  const size_t batches = (keys.size() + kMaxLiveKeys - 1) / kMaxLiveKeys;
  const Deadline by =
      DeadlineIn(connect_timeout_ + io_timeout_ * static_cast<int>(std::max<size_t>(batches, 1)));
  for (size_t at = 0; at < keys.size(); at += kMaxLiveKeys) {
    const std::span<const uint64_t> batch(keys.data() + at,
                                          std::min<size_t>(kMaxLiveKeys, keys.size() - at));
    KVLANE_ASSIGN_OR_RETURN(const uint64_t seq, SendLiveCheck(batch, /*awaited=*/false, by));
    std::string gone;
    Status failed;  // by a revocation that came meanwhile
    Status s = AwaitLiveReply(
        control_.get(), seq, by,
        [&](const std::string& revoked, uint64_t revocation) {
          HandleRevoke(revoked, revocation);
          return failed = latch().Get();
        },
        &gone);
    KVLANE_RETURN_IF_ERROR(failed);
    if (s.code() == Code::kTimeout)
      return Status::Timeout("peer '" + peer_name_ +
                             "' did not answer which of its pieces are registered");
    if (s.code() == Code::kBackend)
      return Status::Backend(s.message() + " (peer '" + peer_name_ + "')");
    KVLANE_RETURN_IF_ERROR(s);
    TakeLiveReply(gone);
  }
  return Status::Ok();
}

// A refreshed table of the peer (LoadPeer): its keys this channel has not
// asked about since its connection was authenticated (a blob may be older than
// a deregistration no revocation told this channel of) are checked before the
// table is installed; the control thread reads the answer.
Status CudaChannel::PeerTableChanged(const std::vector<Piece>& pieces,
                                     const std::vector<Piece>& current) {
  // A failed (or closing) channel moves nothing again: the table goes in unasked.
  const auto dead = [&] {
    return !latch().Get().ok() || closing().load(std::memory_order_acquire);
  };
  if (dead()) return Status::Ok();
  std::vector<uint64_t> fresh;
  {
    std::lock_guard lock(build_mu_);
    for (const Piece& p : pieces)
      if (!live_keys_.contains(p.key) && !revoked_keys_.contains(p.key)) fresh.push_back(p.key);
  }
  // The control thread may first finish a revocation (up to io_timeout for the
  // lanes, and its acknowledgement): two io_timeouts beyond one per batch.
  const Deadline by = DeadlineIn(
      io_timeout_ * static_cast<int>((fresh.size() + kMaxLiveKeys - 1) / kMaxLiveKeys + 2));
  for (size_t at = 0; at < fresh.size(); at += kMaxLiveKeys) {
    const std::span<const uint64_t> batch(fresh.data() + at,
                                          std::min<size_t>(kMaxLiveKeys, fresh.size() - at));
    Result<uint64_t> sent = SendLiveCheck(batch, /*awaited=*/true, by);
    if (!sent.ok()) {
      Fail(sent.status());
      return sent.status();
    }
    const uint64_t seq = *sent;
    std::unique_lock lock(ack_mu_);
    if (!ack_cv_.wait_until(lock, by, [&] { return live_answered_ == seq || dead(); })) {
      lock.unlock();
      const Status late = Status::Timeout("peer '" + peer_name_ +
                                          "' did not answer which of its pieces are registered");
      Fail(late);  // its answer would now come unasked
      return late;
    }
    if (live_answered_ != seq) return Status::Ok();  // failed or closing meanwhile: as above
  }
  // Keys neither table names, and not opened, are forgotten: should a later
  // table name one again, it is asked about again.
  std::lock_guard lock(build_mu_);
  std::unordered_set<uint64_t> named;
  for (const auto* table : {&pieces, &current})
    for (const Piece& p : *table) named.insert(p.key);
  const auto keep = [&](uint64_t k) { return named.contains(k) || remote_.contains(k); };
  std::erase_if(live_keys_, [&](uint64_t k) { return !keep(k); });
  std::erase_if(revoked_keys_, [&](uint64_t k) { return !keep(k); });
  return Status::Ok();
}

// Makes `batch` the check in flight (`checking_`) and sends it. `awaited`:
// the control thread reads the answer, so the check is recorded as the one it
// waits for before the send (the answer may come at once); otherwise the
// caller reads the connection itself (AwaitLiveReply).
Result<uint64_t> CudaChannel::SendLiveCheck(std::span<const uint64_t> batch, bool awaited,
                                            Deadline by) {
  {
    std::lock_guard lock(build_mu_);
    checking_ = std::unordered_set<uint64_t>(batch.begin(), batch.end());
  }
  uint64_t seq;
  {
    std::lock_guard lock(ack_mu_);
    seq = ++live_seq_;
    if (awaited) live_waiting_ = seq;
  }
  std::lock_guard w(write_mu_);
  KVLANE_RETURN_IF_ERROR(SendCtl(control_.get(), CtlType::kLiveCheck, seq, batch.data(),
                                 static_cast<uint32_t>(batch.size_bytes()), by));
  return seq;
}

// The answer to the live check in flight (`checking_`): the keys it names are
// registered no more; the others are live, and a revocation of them from now
// on is recorded.
void CudaChannel::TakeLiveReply(const std::string& gone) {
  MarkRevoked(gone);
  std::lock_guard lock(build_mu_);
  for (uint64_t k : checking_)
    if (!revoked_keys_.contains(k)) live_keys_.insert(k);
  checking_.clear();
}

void CudaChannel::Fail(const Status& s) {
  latch().Latch(s);
  for (int k = 0; k < lane_count(); ++k) queue(k).Wake();
  std::lock_guard lock(ack_mu_);
  ack_cv_.notify_all();
}

void CudaChannel::ControlLoop() {
  CtlFrame f{};
  std::string payload;
  for (;;) {
    Status s = RecvCtl(control_.get(), &f, &payload, io_timeout_);
    if (s.ok() && f.type == static_cast<uint32_t>(CtlType::kNotifyAck)) {
      std::lock_guard lock(ack_mu_);
      if (late_acks_ > 0) {  // the answer to a notification whose Notify gave up
        --late_acks_;
        continue;
      }
      ack_status_ = static_cast<int32_t>(f.seq);
      ++acks_;
      ack_cv_.notify_all();
      continue;
    }
    if (s.ok() && f.type == static_cast<uint32_t>(CtlType::kRevoke) && payload.size() % 8 == 0) {
      HandleRevoke(payload, f.seq);
      continue;
    }
    if (s.ok() && f.type == static_cast<uint32_t>(CtlType::kLiveReply) && payload.size() % 8 == 0) {
      bool asked;
      {
        std::lock_guard lock(ack_mu_);
        asked = live_waiting_ != 0 && f.seq == live_waiting_;
      }
      if (asked) {  // else unasked: a violation, below
        TakeLiveReply(payload);
        std::lock_guard lock(ack_mu_);
        live_answered_ = f.seq;
        live_waiting_ = 0;
        ack_cv_.notify_all();
        continue;
      }
    }
    if (!closing().load(std::memory_order_acquire))
      Fail(s.ok() ? Status::Backend("cuda control: protocol violation by peer '" + peer_name_ + "'")
                  : Status::RemoteDisconnect("peer '" + peer_name_ +
                                             "' closed its control connection (process gone?)"));
    // No answer comes any more: a Notify or a live check waiting for one
    // stops waiting now (closing), not at its deadline.
    std::lock_guard lock(ack_mu_);
    ack_cv_.notify_all();
    return;
  }
}

// Marks the keys revoked, then waits (io_timeout) until nothing launched
// before can still touch them, closes the mappings no live piece uses any
// more, and only then acknowledges: a copy still running at the deadline
// fails the channel instead (the target cuts us off).
void CudaChannel::HandleRevoke(const std::string& keys, uint64_t seq) {
  MarkRevoked(keys);
  if (!LanesQuiet(DeadlineIn(io_timeout_))) {
    if (!closing().load(std::memory_order_acquire))
      Fail(Status::Timeout("cuda: copies to peer '" + peer_name_ +
                           "' still running io_timeout after it revoked memory"));
    return;
  }
  // Before the ack: a later registration of the same memory can only come
  // after it, and must not find a mapping about to close.
  ReleaseRetired();
  std::lock_guard w(write_mu_);
  Status s = SendCtl(control_.get(), CtlType::kRevokeAck, seq, nullptr, 0, DeadlineIn(io_timeout_));
  if (!s.ok()) Fail(s);
}

// Records the keys of a kRevoke frame (or a live check's answer) that this
// channel opened, found live, or is asking about, and lets go of the pieces
// opened (and of the mappings no piece uses any more); any other key is ignored (a
// hostile peer may send any number): should a table name it later, it is asked
// about then (PeerTableChanged).
void CudaChannel::MarkRevoked(const std::string& keys) {
  std::lock_guard lock(build_mu_);
  bool any_opened = false;
  for (size_t i = 0; i + 8 <= keys.size(); i += 8) {
    uint64_t key;
    std::memcpy(&key, keys.data() + i, 8);
    auto it = remote_.find(key);
    const bool opened = it != remote_.end();
    if (opened) {
      it->second->revoked.store(true, std::memory_order_seq_cst);
      remote_.erase(it);  // the tables that use it keep it (and see it revoked)
      any_opened = true;
    }
    const bool was_live = live_keys_.erase(key) != 0;
    if (opened || was_live || checking_.contains(key)) revoked_keys_.insert(key);
  }
  // Only opened keys are in the mappings' lists: a frame of others (a peer's
  // revocations of pieces this channel never used) walks none of them.
  if (any_opened) RetireRevoked();
}

// The seq_cst store of `revoked` (MarkRevoked) and the lanes' seq_cst
// `issuing` flag pair up (Dekker), so a lane either sees the flag or is seen
// issuing. True once every batch issued so far has finished; false at
// `deadline`, or once the channel closes.
bool CudaChannel::LanesQuiet(Deadline deadline) {
  auto waiting = [&] { return !closing().load() && std::chrono::steady_clock::now() < deadline; };
  for (auto& l : lanes_) {
    while (l->issuing.load(std::memory_order_seq_cst)) {
      if (!waiting()) return false;
      std::this_thread::yield();
    }
    uint64_t upto = l->issued.load(std::memory_order_acquire);
    for (uint64_t seq = l->retired.load(std::memory_order_acquire); seq < upto; ++seq) {
      while (!BatchFinished(*l, seq)) {
        if (!waiting()) return false;
        std::this_thread::sleep_for(std::chrono::microseconds(5));
      }
    }
  }
  return true;
}

// True when batch `seq` can no longer touch memory: retired, never launched, or
// its completion word written. Does not wait for the retire thread (which may
// be blocked in Notify, waiting for this control thread).
bool CudaChannel::BatchFinished(const Lane& l, uint64_t seq) {
  if (l.retired.load(std::memory_order_acquire) > seq) return true;
  bool launched = l.batches[seq % kBatchRing].launched.load(std::memory_order_acquire);
  if (l.retired.load(std::memory_order_acquire) > seq) return true;  // the slot may have moved on
  if (!launched) return true;
  const Batch& b = l.batches[seq % kBatchRing];
  if (b.record_only.load(std::memory_order_acquire)) {  // its record stands for the word
    // Acquire loads: they stay before the re-check of `retired`, past which
    // the fields may be another batch's (and `record` null).
    uint64_t* record = b.record.load(std::memory_order_acquire);
    const uint64_t want = b.record_value.load(std::memory_order_acquire);
    if (l.retired.load(std::memory_order_acquire) > seq) return true;
    return Batch::Landed(std::atomic_ref<uint64_t>(*record).load(std::memory_order_acquire), want);
  }
  uint64_t w = std::atomic_ref<uint64_t>(l.done[seq % kBatchRing]).load(std::memory_order_acquire);
  return (w & ~gpu::kDoneSkipped) >= seq + 1;
}

Status CudaChannel::Notify(std::string_view bytes) {
  std::lock_guard one(notify_mu_);
  KVLANE_RETURN_IF_ERROR(latch().Get());
  uint64_t before;
  {
    std::lock_guard lock(ack_mu_);
    before = acks_;
  }
  {
    std::lock_guard w(write_mu_);
    // Bounded: a target that stops reading fails the channel, not the caller's thread.
    Status s = SendCtl(control_.get(), CtlType::kNotify, 0, bytes.data(),
                       static_cast<uint32_t>(bytes.size()), DeadlineIn(io_timeout_));
    if (!s.ok()) {
      Fail(s);
      return s;
    }
  }
  std::unique_lock lock(ack_mu_);
  const auto ended = [&] { return latch().latched() || closing().load(std::memory_order_acquire); };
  bool acked = ack_cv_.wait_for(lock, io_timeout_, [&] { return acks_ > before || ended(); });
  if (acks_ > before) {
    return ack_status_ == 0 ? Status::Ok() : RefusedNotification(ack_status_);
  }
  if (!acked) {
    // Acknowledgements come in order and carry no number: this one may still
    // come, and must not be read as the next notification's.
    ++late_acks_;
    return Status::Timeout("peer did not acknowledge the notification");
  }
  return latch().latched() ? latch().Get() : Status::Canceled("channel closed");
}

void CudaChannel::StopLanes() {
  std::call_once(stop_once_, [this] {
    BeginClose();
    for (auto& l : lanes_) {
      if (l->issuer.joinable()) l->issuer.join();
      if (l->retirer.joinable()) l->retirer.join();
    }
    // The kernels exit now, not in DestroyGpu: another channel's frees, which
    // may wait for every kernel on the device, can come first.
    DeviceGuard guard(device_);
    for (auto& l : lanes_) {
      Status s = l->proxy.Shutdown(io_timeout_);
      if (s.code() == Code::kTimeout) wedged_ = true;
      if (!s.ok()) latch().Latch(s);
    }
  });
}

namespace {
void CUDART_CB HoldUntilReleased(void* release) {
  const auto* r = static_cast<const std::atomic<bool>*>(release);
  while (!r->load(std::memory_order_acquire))
    std::this_thread::sleep_for(std::chrono::microseconds(100));
}
}  // namespace

Status CudaChannel::HoldLaneForTest(int lane, const std::atomic<bool>* release) {
  DeviceGuard guard(device_);
  Lane& l = *lanes_[lane];
  void* arg = const_cast<std::atomic<bool>*>(release);  // only read
  for (cudaStream_t st : {l.ce, l.sm}) KVLANE_CUDA(cudaLaunchHostFunc(st, HoldUntilReleased, arg));
  return Status::Ok();
}

void CudaChannel::Close() {
  std::call_once(close_once_, [this] {
    StopLanes();
    if (control_.valid()) shutdown(control_.get(), SHUT_RDWR);
    if (control_thread_.joinable()) control_thread_.join();
    DestroyGpu();
  });
}

}  // namespace kvlane::core
