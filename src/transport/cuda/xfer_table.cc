// Building a transfer's segment table: every lookup happens here, once per
// transfer, on the first post; later posts reuse the uploaded table.
#include <algorithm>
#include <cstdint>

#include "core/request.h"
#include "transport/cuda/cuda_channel.h"
#include "transport/cuda/cuda_check.h"

namespace kvlane::core {

XferTable::~XferTable() {
  if (segs == nullptr) return;
  DeviceGuard guard(device);
  if (!pooled) {
    (void)cudaFree(segs);
    return;
  }
  // Stream-ordered free: a plain cudaFree waits for the whole device, and a
  // running proxy kernel would hold it up. Ordered after everything the lanes'
  // kernel streams hold now, the launches that read this table among them.
  cudaStream_t stream = cudaStreamLegacy;  // the channel's streams are gone: nothing runs
  std::unique_lock<std::mutex> lock;
  if (free_order != nullptr) {
    lock = std::unique_lock(free_order->mu);
    if (!free_order->lanes.empty()) {
      stream = free_order->stream;
      for (cudaStream_t lane : free_order->lanes) {
        (void)cudaEventRecord(free_order->event, lane);
        (void)cudaStreamWaitEvent(stream, free_order->event, 0);
      }
    }
  }
  (void)cudaFreeAsync(segs, stream);
  (void)cudaGetLastError();
}

void ComputeRuns(XferTable* t) {
  const auto& s = t->host_segs;
  t->contig_end.assign(s.size(), 0);
  t->max_len = 0;
  for (const auto& g : s) t->max_len = std::max(t->max_len, g.len);
  for (size_t i = s.size(); i-- > 0;) {
    bool joins = i + 1 < s.size() && s[i].src + s[i].len == s[i + 1].src && s[i].dst + s[i].len == s[i + 1].dst;
    t->contig_end[i] = joins ? t->contig_end[i + 1] : static_cast<uint32_t>(i + 1);
  }
}

Status CudaChannel::TableFor(Request* r, XferTable** out) {
  std::lock_guard lock(build_mu_);
  if (!r->transport_state) {
    auto t = std::make_shared<XferTable>();
    t->device = device_;
    t->free_order = free_order_;
    Status s = BuildTable(r, t.get());
    if (!s.ok()) t->error = s;
    r->transport_state = t;
    r->transport_ready.store(t.get(), std::memory_order_release);
  }
  *out = static_cast<XferTable*>(r->transport_state.get());
  return (*out)->error;
}

Status CudaChannel::BuildTable(Request* r, XferTable* t) {
  t->host_segs.resize(r->segs.size());
  std::shared_ptr<RemotePiece> rp;
  const bool write = r->op == Op::kWrite;
  // A READ lands in local memory, a WRITE in the peer's (opened here): on this
  // GPU when every destination byte is, a peer sharing this GPU included (its
  // reads go through this GPU's L2 as ours do). Both answers are kept per
  // piece: a peer piece's covers its every byte (RemotePiece::on_device); a
  // local piece's covers the span of it seen so far (LocalPiece, LocalSpan), so the
  // driver is asked only about bytes no earlier build covered. (Asking it
  // about every segment at every build coincided, on one H100 run of session
  // 31, with a small post waiting for a 1 GiB copy on the other lane, which no
  // run had shown before; the cause is unproven, so repeated builds do not ask.)
  t->dst_on_device = true;
  for (size_t i = 0; i < r->segs.size(); ++i) {
    const Segment& sg = r->segs[i];
    if (rp == nullptr || rp->key != sg.remote_key) {
      KVLANE_ASSIGN_OR_RETURN(rp, FindRemote(r, sg.remote_key));
      if (std::find(t->pieces.begin(), t->pieces.end(), rp) == t->pieces.end()) t->pieces.push_back(rp);
    }
    if (sg.len == 0 || sg.remote_addr < rp->base || sg.len > rp->len || sg.remote_addr - rp->base > rp->len - sg.len)
      return Status::NotAllowed("segment outside the peer's piece");
    KVLANE_ASSIGN_OR_RETURN(LocalSpan * local, LocalPiece(sg.local_key, sg.local_addr));
    // A WRITE's local bytes are its source: their kind is checked, nothing more.
    const bool dst_here =
        write ? rp->on_device
              : local->Cover(sg.local_addr, sg.len,
                             [this](uint64_t from, uint64_t n) { return OnThisDevice(from, n); });
    uint64_t remote = rp->mapped + (sg.remote_addr - rp->base);
    t->dst_on_device = t->dst_on_device && dst_here;
    t->host_segs[i] = {write ? sg.local_addr : remote, write ? remote : sg.local_addr, sg.len};
  }
  ComputeRuns(t);
  // Allocated and uploaded on the channel's build stream, then waited for:
  // kernels on every lane's stream read the table, and none of those streams
  // waits for another. (It was a cudaMemcpy on the legacy stream, which from
  // pageable memory may return before its bytes land: a first post's kernel
  // could read a stale table, move nothing or the wrong bytes, and still
  // report success. CudaStressTest found it, session 7.)
  size_t bytes = t->host_segs.size() * sizeof(gpu::CopySeg);
  t->pooled =
      cudaMallocAsync(reinterpret_cast<void**>(&t->segs), bytes, build_stream_) == cudaSuccess;
  if (!t->pooled) {
    (void)cudaGetLastError();
    KVLANE_CUDA(cudaMalloc(reinterpret_cast<void**>(&t->segs), bytes));
  }
  KVLANE_CUDA(
      cudaMemcpyAsync(t->segs, t->host_segs.data(), bytes, cudaMemcpyHostToDevice, build_stream_));
  KVLANE_CUDA(cudaStreamSynchronize(build_stream_));
  return Status::Ok();
}

// REQUIRES: build_mu_ held.
Result<std::shared_ptr<RemotePiece>> CudaChannel::FindRemote(Request* r, uint64_t key) {
  auto it = remote_.find(key);
  if (it != remote_.end()) return it->second;
  return OpenRemote(r, key);
}

// Whether every byte of [addr, addr + len) is memory of this channel's GPU,
// allocation by allocation (a VMM range may map allocations of several
// devices, or host memory, back to back). A failed query, or more allocations
// than the range can hold (1024, plus one per 2 MiB: a VMM allocation is at
// least the 2 MiB granularity, so a 4 GiB piece of them stays on), answers no
// (the conservative fence). REQUIRES: build_mu_ held.
bool CudaChannel::OnThisDevice(uint64_t addr, uint64_t len) {
  const auto range = Driver().address_range;
  if (range == nullptr || len == 0 || len > UINT64_MAX - addr) return false;
  const uint64_t end = addr + len, max_lookups = 1024 + len / (uint64_t{2} << 20);
  uint64_t lookups = 0;
  for (uint64_t at = addr; at < end;) {
    if (++lookups > max_lookups) return false;
    cudaPointerAttributes a{};
    unsigned long long base = 0;
    size_t size = 0;
    if (cudaPointerGetAttributes(&a, reinterpret_cast<void*>(at)) != cudaSuccess) {
      (void)cudaGetLastError();
      return false;
    }
    if (a.type != cudaMemoryTypeDevice || a.device != device_ || range(&base, &size, at) != 0 ||
        size == 0 || base > at || size > UINT64_MAX - base || base + size <= at)
      return false;
    at = base + size;
  }
  return true;
}

// Local memory must be device memory or pinned host memory; true: memory of
// this channel's GPU. REQUIRES: build_mu_ held.
Result<bool> CudaChannel::CheckLocal(uint64_t addr) {
  cudaPointerAttributes a{};
  KVLANE_CUDA(cudaPointerGetAttributes(&a, reinterpret_cast<void*>(addr)));
  if (a.type == cudaMemoryTypeDevice) {
    KVLANE_RETURN_IF_ERROR(EnablePeer(a.device));
    return a.device == device_;
  }
  if (a.type == cudaMemoryTypeHost || a.type == cudaMemoryTypeManaged) return false;
  return Status::NotSupported("local memory of a cuda transfer must be device or pinned host memory");
}

// What this channel has judged of local piece `key`, first seen at `addr`:
// then it goes through CheckLocal (device or pinned host memory; peer access to
// its GPU), and its LocalSpan asks OnThisDevice only about bytes no earlier
// build covered. The pointer stays valid until the next call (which may sweep
// the deregistered pieces' entries).
// REQUIRES: build_mu_ held.
Result<LocalSpan*> CudaChannel::LocalPiece(uint64_t key, uint64_t addr) {
  if (LocalSpan* seen = local_on_device_.Find(key)) return seen;
  KVLANE_ASSIGN_OR_RETURN(bool on_device, CheckLocal(addr));
  return local_on_device_.Add(
      key, LocalSpan(addr, on_device),
      [this](std::span<const uint64_t> keys) { return registry_->Live(keys); });
}

// REQUIRES: build_mu_ held; called on a lane thread (current device = device_).
Status CudaChannel::EnablePeer(int device) {
  if (device == device_ || std::find(peer_enabled_.begin(), peer_enabled_.end(), device) != peer_enabled_.end())
    return Status::Ok();
  int can = 0;
  KVLANE_CUDA(cudaDeviceCanAccessPeer(&can, device_, device));
  if (!can) return Status::NotSupported("GPU " + std::to_string(device_) + " cannot access GPU " + std::to_string(device));
  cudaError_t e = cudaDeviceEnablePeerAccess(device, 0);
  if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled) return CudaStatus(e, "cudaDeviceEnablePeerAccess", __FILE__, __LINE__);
  (void)cudaGetLastError();
  peer_enabled_.push_back(device);
  return Status::Ok();
}

}  // namespace kvlane::core
