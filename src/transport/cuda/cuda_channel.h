// CudaChannel: the initiator side of the cuda transport, for one peer on this
// host. Each lane owns two CUDA streams on the channel's GPU (a high-priority
// one for SM copy kernels, one for copy-engine copies), a resident proxy kernel
// for small transfers (CudaProxy), an issue thread and a retire thread. On a
// request's first chunk the issue thread moves the whole request at once: one
// ring entry for the proxy (small), one cudaMemcpyAsync (one contiguous run) or
// one kernel over the uploaded segment table; its later chunks retire behind
// it. A posting thread issues its own request itself when that needs no
// set-up (Kick), under the lane's issue mutex, so tickets stay in order; one
// on an idle lane it moves without a queue item (PostWhole). The
// GPU then writes the batch's number into a pinned host word (and, for a post
// it publishes itself, the request's record; a copy-engine post only the
// record); the retire thread polls that host word (never the GPU) and retires
// FIFO.
//
// Thread-safety: Notify and Close are thread-safe; lanes run on their own threads.
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/channel.h"
#include "core/metadata.h"
#include "core/request.h"
#include "transport/cuda/cuda_blob.h"
#include "transport/cuda/cuda_proxy.h"
#include "transport/cuda/local_span.h"
#include "transport/cuda/vmm.h"
#include "transport/cuda/xfer_table.h"
#include "transport/stream/fd_passing.h"
#include "transport/stream/socket.h"
#include "transport/transport.h"

namespace kvlane::core {

struct LocalEndpoint;
struct Request;

class CudaChannel final : public Channel {
 public:
  // REQUIRES: `control` is an authenticated control connection to `peer`;
  // `records`: ctx.records mapped for the GPU (nullptr: the retire threads
  // publish every post).
  static Result<std::unique_ptr<Channel>> Open(const AgentContext& ctx, const AgentMeta& peer,
                                               int device, Fd control, uint8_t* records);
  ~CudaChannel() override { Close(); }

  const char* transport() const override { return "cuda"; }
  // One launch per posted list already drives the link; striping splits it.
  bool stripe_bulk() const override { return false; }
  bool whole_requests() const override { return true; }
  // Issues what is queued on `lane` on the posting thread when nothing has to
  // be built or started first (table uploaded; the proxy running for a small
  // request): the post skips the hop through the issue thread.
  void Kick(int lane) override;
  // A post on an idle lane (for a small one: its proxy runs, only proxy posts
  // the GPU publishes in flight): the posting thread writes the proxy's ring
  // entry, or launches the copy, itself (no queue item).
  bool PostWhole(Request* r, int lane) override;
  Status Notify(std::string_view bytes) override;
  Status PeerTableChanged(const std::vector<Piece>& pieces,
                          const std::vector<Piece>& current) override;
  void Close() override;
  // Joins the lane threads and stops the proxies (bounded by io_timeout).
  void StopLanes() override;

  // Test hooks: the proxy of `lane` has seen the host's latch / raises a GPU-side error.
  bool ProxySawLatch(int lane) const { return lanes_[lane]->proxy.saw_latch(); }
  void InjectProxyFault(int lane) { lanes_[lane]->proxy.InjectFault(); }
  // Test hook: proxy launches made on `lane` so far (renewals included).
  uint64_t ProxyLaunches(int lane) const { return lanes_[lane]->proxy.generation(); }
  // Test hook: a GPU that stops answering, as the lane sees it. Work queued
  // from now on `lane`'s copy streams (the copy engine's and the copy
  // kernels', not the proxy's) waits until `*release` reads true (a host
  // callback on each stream spins on it). REQUIRES: *release outlives the
  // streams' wait, and is set before the process needs the device again.
  Status HoldLaneForTest(int lane, const std::atomic<bool>* release);
  // Test hook: runs on a lane's retire thread when it gives up on a post the
  // GPU holds, before it poisons the post and takes its last look at the
  // record. REQUIRES: set before the post, while no lane gives up.
  void SetGiveUpHookForTest(std::function<void()> hook) { give_up_hook_ = std::move(hook); }
  // Test hook: how many of a peer's cudaMalloc allocations (legacy IPC
  // handles) the channel holds open.
  size_t LegacyOpenedForTest() {
    std::lock_guard lock(build_mu_);
    return opened_.size();
  }
  // Test hook: what the channel holds of a peer's pieces: opened, their keys
  // known revoked, and mappings (legacy IPC and VMM) in use.
  struct PeerHeld {
    size_t opened = 0, revoked_keys = 0, mappings = 0;
  };
  PeerHeld PeerHeldForTest() {
    std::lock_guard lock(build_mu_);
    return {remote_.size(), revoked_keys_.size(), opened_.size() + vmm_.size()};
  }
  // Test hook: how many local pieces the channel holds a judgement of.
  size_t LocalPiecesForTest() {
    std::lock_guard lock(build_mu_);
    return local_on_device_.size();
  }

 private:
  static constexpr uint32_t kBatchRing = gpu::kProxyRing;  // launched batches in flight per lane

  // A cache line or two of its own: the retire thread reads one while the
  // issuer fills the next.
  struct alignas(64) Batch {
    uint32_t items = 0;    // tickets it retires; 0: a post moved by PostWhole (no queue item)
    WorkItem whole;        // that post (items == 0)
    std::atomic<bool> launched{false};  // the GPU will write its completion word
    Status status;         // outcome when not launched (or the launch error)
    // A whole post whose terminal record the GPU writes (ok) with the
    // completion word; then the retire thread only lets go of it, once the
    // record (`record` reads `record_value`) has landed too.
    // Atomics (relaxed, written before `launched`): the control thread reads
    // them in BatchFinished while the slot may be reused.
    bool direct = false;
    std::atomic<uint64_t*> record{nullptr};
    std::atomic<uint64_t> record_value{0};
    // The GPU writes only the record (a copy-engine post): it is the batch's
    // completion word.
    std::atomic<bool> record_only{false};
    // A direct batch's record word `w` reads {gen, ok} (`want`), or its owner
    // has posted again, which it does only after it read {gen, ok}
    // (AgentImpl::Post). RecordLanded() reads the record.
    static bool Landed(uint64_t w, uint64_t want) {
      return w == want || RecordGen(w) != RecordGen(want);
    }
    bool RecordLanded() const;
    // Who publishes this batch's post: the GPU, which writes `value` to the
    // record at `at` (`only`: instead of the completion word), or, with `at`
    // null, the host.
    void SetRecord(uint64_t* at, uint64_t value, bool only);
    // What it carried (TakeDirect); items == 0: what PostWhole counted (0: none).
    uint64_t bytes = 0;
  };
  struct Lane {
    cudaStream_t sm = nullptr;            // high priority: copy kernels
    cudaStream_t ce = nullptr;            // copy engine: contiguous bulk
    uint32_t* blocks_finished = nullptr;  // device memory: the kernel's arrival counter
    uint64_t* done = nullptr;             // pinned host: kBatchRing completion words
    std::unique_ptr<Batch[]> batches{new Batch[kBatchRing]};
    // A cache line per writer: the retire thread spins on the first, the
    // issuer (a posting thread in Kick or PostWhole, or the issue thread) owns the third.
    alignas(64) std::atomic<uint64_t> issued{0};  // batches published (issuer)
    std::atomic<uint32_t> bell{0};                // wakes the retire thread (issuer)
    std::atomic<bool> issuer_done{false};
    alignas(64) std::atomic<uint64_t> retired{0};  // batches retired (retire thread)
    bool wedged = false;                           // a wait timed out (retire thread)
    // Held while issuing: by the issue thread, or by a posting thread in Kick
    // or PostWhole.
    // Guards the issue cursor, `batches` being filled, `proxy`, `host_after`
    // and `ahead_*`.
    alignas(64) std::mutex issue_mu;
    std::atomic<bool> issuing{false};  // inside a batch's live check + launch
    // 1 + the newest batch the GPU does not publish from the proxy (issued
    // under issue_mu): a direct proxy post must not overtake it (FIFO).
    uint64_t host_after = 0;
    // The request whose later chunks were moved by an earlier batch (issue thread).
    const Request* ahead_req = nullptr;
    uint32_t ahead_gen = 0, ahead_last = 0;
    CudaProxy proxy;  // small transfers
    std::thread issuer, retirer;
  };

  CudaChannel(const AgentContext& ctx, const AgentMeta& peer, int device, Fd control, uint8_t* records);
  Status CreateLanes();
  void DestroyGpu();

  // cuda_lane.cc
  void IssueLoop(int lane);
  void IdleWait(int lane, std::chrono::steady_clock::time_point* active);
  void MirrorErrors(Lane& l);
  void IssueBatch(int lane, bool closing);
  enum class Route { kNotYet, kProxy, kStartProxy, kLaunch };
  Route RouteOf(const Lane& l, const WorkItem& w) const;
  // A post of `bytes` in `segs` segments goes to the lane's proxy.
  bool FitsProxy(const Lane& l, uint64_t bytes, uint32_t segs) const;
  // The GPU may publish batch `seq` without overtaking one the host publishes
  // (FIFO on the lane): the lane is empty, or only single-block proxy posts
  // the GPU publishes are in flight and this is one too. REQUIRES: l.issue_mu.
  bool InOrder(const Lane& l, uint64_t seq, bool proxy) const;
  // The GPU may publish `r`'s record itself (what does not depend on the
  // lane): records mapped for it, the independent policy (no global order),
  // no notification (the retire thread sends it after the data).
  bool DevicePublishes(const Request& r) const;
  // Batch `seq` is filled: publishes it to the retire thread (and ends the
  // issue that set l.issuing). REQUIRES: l.issue_mu.
  void Issued(Lane& l, uint64_t seq, bool launched);
  uint32_t Gather(int lane, const WorkItem& first, uint32_t* last);
  // `record`: the request's record as the GPU addresses it, which gets
  // `record_value` with the completion word (nullptr: none), or instead of it
  // (*record_only set: the copy-engine path).
  Status Launch(Lane& l, const XferTable& t, uint32_t seg_begin, uint32_t seg_end, uint64_t bytes,
                uint64_t seq, uint64_t* record, uint64_t record_value, bool* record_only);
  uint64_t* RecordOf(const Request& r) const;
  void RetireLoop(int lane);
  Status WaitDone(Lane& l, uint64_t seq);
  Status WaitRecord(Lane& l, const Batch& b);
  void Poison(Request& r);
  Status PollErrors(Lane& l);

  // xfer_table.cc
  Status TableFor(Request* r, XferTable** out);
  Status BuildTable(Request* r, XferTable* t);
  Result<std::shared_ptr<RemotePiece>> FindRemote(Request* r, uint64_t key);
  Result<bool> CheckLocal(uint64_t addr);
  Result<LocalSpan*> LocalPiece(uint64_t key, uint64_t addr);
  bool OnThisDevice(uint64_t addr, uint64_t len);
  Status EnablePeer(int device);

  // remote_piece.cc
  Result<std::shared_ptr<RemotePiece>> OpenRemote(Request* r, uint64_t key);
  Status PeerPiece(Request* r, uint64_t key, Piece* piece, CudaExport* e, AgentMeta* dial);
  Result<uint64_t> MapExport(const CudaExport& e, const AgentMeta& dial);
  Result<uint64_t> MapLegacy(const CudaExport& e);
  Result<uint64_t> MapVmm(const CudaExport& e, const AgentMeta& dial);
  // Asks the target which pieces of `peer` (the metadata the channel opens
  // with) are no longer registered, and marks them revoked: revocations sent
  // before this connection was authenticated never reached it.
  Status CheckLiveKeys(const AgentMeta& peer);
  // Makes `batch` the check in flight and sends it by `by`; its number. `awaited`:
  // the control thread reads the answer (recorded before the send).
  Result<uint64_t> SendLiveCheck(std::span<const uint64_t> batch, bool awaited, Deadline by);
  void TakeLiveReply(const std::string& gone);
  void RetireRevoked();
  // Closes and unmaps the retired mappings. REQUIRES: no copy launched before
  // their revocation still runs (LanesQuiet). May wait for the device (a
  // running proxy kernel: up to its life, ~2 ms).
  void ReleaseRetired();

  // cuda_channel.cc
  void ControlLoop();
  void HandleRevoke(const std::string& keys, uint64_t seq);
  void MarkRevoked(const std::string& keys);
  bool LanesQuiet(Deadline deadline);
  static bool BatchFinished(const Lane& l, uint64_t seq);
  void Fail(const Status& s);

  const std::string self_name_;
  const std::string peer_name_;
  // The peer when it is an agent of this process (its live registry), else
  // null. A blob's process token alone does not make a peer local: it travels
  // in clear, and a peer that copied ours would get raw addresses of this
  // process used as its pieces.
  const std::shared_ptr<LocalEndpoint> local_peer_;
  const std::shared_ptr<Registry> registry_;  // this agent's: which local pieces are live
  const int device_;
  const std::chrono::microseconds spin_;
  const std::chrono::milliseconds io_timeout_;
  std::function<void()> give_up_hook_;  // SetGiveUpHookForTest
  const std::chrono::milliseconds connect_timeout_;
  const int proxy_blocks_;
  const uint64_t proxy_max_bytes_;
  const std::chrono::microseconds proxy_idle_exit_;
  const std::chrono::microseconds proxy_renew_every_;
  uint8_t* const records_;          // the slots' records as the GPU addresses them (or nullptr)
  const uint32_t record_slots_;
  int max_blocks_ = 264;
  bool wedged_ = false;  // a proxy did not stop: leak GPU resources rather than block
  std::vector<std::unique_ptr<Lane>> lanes_;

  std::mutex build_mu_;  // builds tables; guards the maps below
  // Tables are uploaded on it (BuildTable). GUARDED_BY(build_mu_)
  cudaStream_t build_stream_ = nullptr;
  // The lanes' kernel streams, for the stream-ordered free of this channel's
  // tables (XferTable::free_order).
  std::shared_ptr<TableFreeOrder> free_order_ = std::make_shared<TableFreeOrder>();
  // The peer's pieces opened here and not revoked (MarkRevoked lets go of a
  // revoked one; the tables that use it keep it). GUARDED_BY(build_mu_)
  std::unordered_map<uint64_t, std::shared_ptr<RemotePiece>> remote_;
  // A peer's cudaMalloc allocations opened here, by their IPC handle's bytes
  // (a later allocation at the same address is other memory, with another
  // handle): the mapping and its size as this process's driver reports it.
  struct LegacyMapping {
    void* ptr = nullptr;
    uint64_t len = 0;
    std::vector<uint64_t> keys;  // the pieces that use it, not revoked (RetireRevoked)
  };
  std::unordered_map<std::string, LegacyMapping> opened_;  // GUARDED_BY(build_mu_)
  std::vector<void*> retired_legacy_;  // closed as retired_vmm_ below; GUARDED_BY(build_mu_)
  // A peer's VMM memory mapped here, by its (alloc_base, alloc_len), with the
  // piece keys that use it. Once all of them are revoked it leaves the map (a
  // later registration at the same addresses may be other memory) for
  // `retired_vmm_`, unmapped once no copy can touch it, just before the
  // revocation's ack (ReleaseRetired), so the exporter's freed memory does not
  // stay alive.
  struct VmmEntry {
    std::unique_ptr<VmmMapping> mapping;
    std::vector<uint64_t> keys;  // as LegacyMapping::keys
  };
  std::map<std::pair<uint64_t, uint64_t>, VmmEntry> vmm_;          // GUARDED_BY(build_mu_)
  std::vector<std::unique_ptr<VmmMapping>> retired_vmm_;           // GUARDED_BY(build_mu_)
  // The peer's keys as this channel knows them since its control connection
  // was authenticated (from then on every revocation reaches it): revoked (see
  // MarkRevoked for which are kept), confirmed registered by a live check
  // (CheckLiveKeys, PeerTableChanged) and not revoked since, and those of the
  // check in flight. Every key of the peer's installed table is revoked or
  // live; OpenRemote opens no other. Bounded by the keys of the peer's last two
  // tables and those opened and not revoked (a revoked piece leaves remote_).
  // GUARDED_BY(build_mu_)
  std::unordered_set<uint64_t> revoked_keys_;
  std::unordered_set<uint64_t> live_keys_;
  std::unordered_set<uint64_t> checking_;
  // Local pieces seen, by key (LocalPiece); those deregistered are swept as
  // new ones come (LocalSpans::Add asks registry_). GUARDED_BY(build_mu_)
  LocalSpans local_on_device_;
  std::vector<int> peer_enabled_;                   // GUARDED_BY(build_mu_)
  std::string blob_bytes_;                          // GUARDED_BY(build_mu_)
  CudaBlob blob_;                                   // GUARDED_BY(build_mu_)

  Fd control_;
  std::thread control_thread_;
  std::mutex write_mu_;      // serializes writes on control_
  std::mutex notify_mu_;     // one notification in flight
  std::mutex ack_mu_;
  std::condition_variable ack_cv_;
  uint64_t acks_ = 0;        // GUARDED_BY(ack_mu_)
  uint64_t late_acks_ = 0;   // GUARDED_BY(ack_mu_): given-up notifications' answers to drop
  // Live checks (one thread checks at a time: the opener, then LoadPeer's
  // under PeerState::refresh_mu): the last one's number, the one the control
  // thread awaits the answer of (0: none) and the last answered.
  uint64_t live_seq_ = 0;       // GUARDED_BY(ack_mu_)
  uint64_t live_waiting_ = 0;   // GUARDED_BY(ack_mu_)
  uint64_t live_answered_ = 0;  // GUARDED_BY(ack_mu_)
  int32_t ack_status_ = 0;   // GUARDED_BY(ack_mu_)
  std::once_flag stop_once_;
  std::once_flag close_once_;
};

}  // namespace kvlane::core
