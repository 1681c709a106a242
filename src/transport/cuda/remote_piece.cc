// Reaching a peer's pieces from this channel's GPU: in the same process, the
// peer's own address (peer access on); in another process, the memory its
// metadata exports: a legacy IPC handle (opened once per handle) or VMM
// allocations (imported and mapped once per exported range, vmm.h).
#include <algorithm>
#include <cstring>
#include <thread>

#include "core/peer.h"
#include "core/plain_text.h"
#include "core/request.h"
#include "transport/cuda/cuda_channel.h"
#include "transport/cuda/cuda_check.h"
#include "transport/cuda/cuda_control.h"
#include "transport/local/local_directory.h"

namespace kvlane::core {

// Resolves a peer piece against the peer's latest metadata. REQUIRES: build_mu_ held.
Result<std::shared_ptr<RemotePiece>> CudaChannel::OpenRemote(Request* r, uint64_t key) {
  if (revoked_keys_.contains(key)) return Status::RemoteStale("peer deregistered this piece");
  // Every key of the peer's installed table is revoked or live (live_keys_):
  // anything else is a key this channel never asked the peer about.
  if (!live_keys_.contains(key))
    return Status::RemoteStale("peer piece was not confirmed registered over this channel");
  Piece piece;
  CudaExport e;
  AgentMeta dial;
  KVLANE_RETURN_IF_ERROR(PeerPiece(r, key, &piece, &e, &dial));
  auto rp = std::make_shared<RemotePiece>();
  rp->key = key;
  rp->base = piece.base;
  rp->len = piece.len;
  if (local_peer_ != nullptr) {
    // The piece must be one the peer agent registered and still holds: its
    // metadata (what we were given) is not proof of that.
    {
      auto lock = local_peer_->registry->LockShared();
      uint8_t* at = nullptr;
      // Op::kRead: "still registered" only. The mapping serves every later
      // request; a WRITE into a read-only piece is refused at MakeTransfer.
      KVLANE_RETURN_IF_ERROR(
          local_peer_->registry->LookupLocked(key, piece.base, piece.len, Op::kRead, &at));
    }
    cudaPointerAttributes a{};
    KVLANE_CUDA(cudaPointerGetAttributes(&a, reinterpret_cast<void*>(piece.base)));
    if (a.type == cudaMemoryTypeDevice)
      KVLANE_RETURN_IF_ERROR(EnablePeer(a.device));
    else if (a.type != cudaMemoryTypeHost && a.type != cudaMemoryTypeManaged)
      return Status::NotSupported("peer memory is neither device nor pinned host memory");
    rp->mapped = piece.base;
  } else {
    KVLANE_ASSIGN_OR_RETURN(rp->mapped, MapExport(e, dial));
  }
  // From this node for sure: a peer in this process, a legacy IPC handle or VMM
  // allocations imported from fds. A fabric handle offered for any allocation is
  // imported first (vmm_import.cc).
  const bool same_node = local_peer_ != nullptr ||
                         std::none_of(e.allocs.begin(), e.allocs.end(), [](const CudaVmmAlloc& a) {
                           return (a.handles & kVmmFabric) != 0;
                         });
  rp->on_device = same_node && OnThisDevice(rp->mapped, rp->len);
  remote_[key] = rp;
  return rp;
}

// Copies the peer's piece `key` and, for a peer in another process, its export
// entry and what FetchPeerFd needs to dial it (into `dial`), under the peer's
// lock; nothing slow happens while it is held. REQUIRES: build_mu_ held.
Status CudaChannel::PeerPiece(Request* r, uint64_t key, Piece* piece, CudaExport* e,
                              AgentMeta* dial) {
  PeerState& peer = *r->peer;
  while (!peer.mu.try_lock()) {  // Close() may hold it while joining this thread
    if (closing().load(std::memory_order_acquire)) return Status::Canceled("channel closed");
    std::this_thread::yield();
  }
  std::lock_guard plock(peer.mu, std::adopt_lock);
  auto p = std::find_if(peer.meta.pieces.begin(), peer.meta.pieces.end(),
                        [&](const Piece& x) { return x.key == key; });
  if (p == peer.meta.pieces.end()) return Status::RemoteStale("peer piece is no longer registered");
  *piece = *p;
  if (local_peer_ != nullptr) return Status::Ok();
  if (peer.meta.cuda_blob != blob_bytes_) {
    KVLANE_ASSIGN_OR_RETURN(blob_, DecodeCudaBlob(peer.meta.cuda_blob));
    blob_bytes_ = peer.meta.cuda_blob;
  }
  auto x = std::find_if(blob_.exports.begin(), blob_.exports.end(),
                        [&](const CudaExport& y) { return y.key == key; });
  if (x == blob_.exports.end())
    return piece->kind == MemoryKind::kCuda
               ? Status::NotSupported(
                     "peer exported no handle for this device piece (not device memory?)")
               : Status::NotSupported(
                     "host memory of another process is not reachable by the cuda transport");
  if (x->piece_base != piece->base || x->piece_len != piece->len)
    return Status::InvalidArgument("cuda metadata disagrees with the peer's piece table");
  *e = *x;
  dial->name = peer.meta.name;
  dial->agent_id = peer.meta.agent_id;
  dial->secret = peer.meta.secret;
  return Status::Ok();
}

// The address of `e`'s piece in this process. REQUIRES: build_mu_ held.
Result<uint64_t> CudaChannel::MapExport(const CudaExport& e, const AgentMeta& dial) {
  switch (e.kind) {
    case ExportKind::kLegacyIpc:
      return MapLegacy(e);
    case ExportKind::kVmm:
      return MapVmm(e, dial);
    default:
      return Status::NotSupported("peer '" + peer_name_ +
                                  "' cannot share this device piece: " + PlainTextOf(e.reason));
  }
}

// The sizes in the peer's metadata are claims: the allocation the handle
// opens must be at least as long as the export says (DecodeCudaBlob already
// keeps the piece inside alloc_base + alloc_len), else the GPU would copy past
// the mapping, into whatever this process has there. REQUIRES: build_mu_ held.
Result<uint64_t> CudaChannel::MapLegacy(const CudaExport& e) {
  auto refused = [&](uint64_t opens) {
    return Status::NotAllowed("peer '" + peer_name_ + "' claims a " + std::to_string(e.alloc_len) +
                              "-byte allocation; its handle opens " + std::to_string(opens) +
                              " bytes");
  };
  const std::string id(e.handle.begin(), e.handle.end());
  auto it = opened_.find(id);
  if (it == opened_.end()) {
    if (Driver().address_range == nullptr)
      return Status::NotSupported("cuMemGetAddressRange is missing: cannot check a peer's memory");
    LegacyMapping m;
    cudaIpcMemHandle_t h{};
    static_assert(sizeof(h) == sizeof(e.handle));
    std::memcpy(&h, e.handle.data(), sizeof(h));
    cudaError_t err = cudaIpcOpenMemHandle(&m.ptr, h, cudaIpcMemLazyEnablePeerAccess);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      return CudaStatus(err, "cudaIpcOpenMemHandle", __FILE__, __LINE__);
    }
    unsigned long long base = 0;
    size_t size = 0;
    const bool sized =
        Driver().address_range(&base, &size, reinterpret_cast<unsigned long long>(m.ptr)) == 0 &&
        base == reinterpret_cast<unsigned long long>(m.ptr);
    // A handle whose size cannot be read, or that opens less than the claim,
    // is closed again at once (not kept open until the channel closes).
    if (!sized || e.alloc_len > size) {
      (void)cudaIpcCloseMemHandle(m.ptr);
      (void)cudaGetLastError();
      if (!sized)
        return Status::Backend("cannot read the size of peer '" + peer_name_ + "' memory opened");
      return refused(size);
    }
    m.len = size;
    it = opened_.emplace(id, m).first;
  } else if (e.alloc_len > it->second.len) {
    return refused(it->second.len);  // opened for an honest claim before: stays open for it
  }
  if (std::find(it->second.keys.begin(), it->second.keys.end(), e.key) == it->second.keys.end())
    it->second.keys.push_back(e.key);
  return reinterpret_cast<uint64_t>(it->second.ptr) + (e.piece_base - e.alloc_base);
}

// REQUIRES: build_mu_ held; on a lane thread (current device = device_).
Result<uint64_t> CudaChannel::MapVmm(const CudaExport& e, const AgentMeta& dial) {
  const std::pair<uint64_t, uint64_t> span{e.alloc_base, e.alloc_len};
  auto it = vmm_.find(span);
  if (it == vmm_.end()) {
    // The peer's own socket, whatever its metadata says (as at Connect).
    FdPeer p{self_name_, dial, ControlSocketName(dial.agent_id), connect_timeout_, io_timeout_};
    p.cancel = &closing();  // Close() need not wait for the import's deadline
    auto m = VmmMapping::Map(e, device_, [&](uint32_t i) { return FetchPeerFd(p, e.key, i); });
    if (!m.ok()) return m.status();
    it = vmm_.emplace(span, VmmEntry{std::move(m).value(), {}}).first;
  }
  it->second.keys.push_back(e.key);
  return it->second.mapping->base() + (e.piece_base - e.alloc_base);
}

// Drops the revoked keys from the mappings' key lists, and moves the mappings
// (legacy IPC and VMM) left with none out of the lookup maps. REQUIRES:
// build_mu_ held, every revoked key of theirs in revoked_keys_ (MarkRevoked).
void CudaChannel::RetireRevoked() {
  // Drops `keys`' revoked ones; whether none is left.
  auto unused_now = [&](std::vector<uint64_t>& keys) {
    std::erase_if(keys, [&](uint64_t k) { return revoked_keys_.contains(k); });
    return keys.empty();
  };
  for (auto it = vmm_.begin(); it != vmm_.end();) {
    if (!unused_now(it->second.keys)) {
      ++it;
      continue;
    }
    retired_vmm_.push_back(std::move(it->second.mapping));
    it = vmm_.erase(it);
  }
  for (auto it = opened_.begin(); it != opened_.end();) {
    if (!unused_now(it->second.keys)) {
      ++it;
      continue;
    }
    retired_legacy_.push_back(it->second.ptr);
    it = opened_.erase(it);
  }
}

void CudaChannel::ReleaseRetired() {
  std::lock_guard lock(build_mu_);
  if (retired_legacy_.empty() && retired_vmm_.empty()) return;
  DeviceGuard on(device_);  // the handles were opened in this device's context
  for (void* p : retired_legacy_) (void)cudaIpcCloseMemHandle(p);
  retired_legacy_.clear();
  retired_vmm_.clear();  // unmaps and frees the address ranges
  (void)cudaGetLastError();
}

}  // namespace kvlane::core
