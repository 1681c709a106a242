#include "transport/cuda/cuda_transport.h"

#include <cstring>
#include <unordered_map>

#include "core/host_info.h"
#include "transport/cuda/cuda_blob.h"
#include "transport/cuda/cuda_channel.h"
#include "transport/cuda/cuda_check.h"
#include "transport/cuda/cuda_control.h"
#include "transport/cuda/vmm.h"
#include "transport/local/local_directory.h"

namespace kvlane::core {
namespace {

// Whether the driver says `base` can take cudaIpcGetMemHandle (true when it cannot tell).
bool LegacyIpcCapable(uint64_t base) {
  const auto attr = CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE;
  int capable = 0;
  if (Driver().pointer_attribute == nullptr ||
      Driver().pointer_attribute(&capable, attr, base) != CUDA_SUCCESS)
    return true;
  return capable != 0;
}

// How another process reaches a device piece: the legacy IPC handle of its
// allocation (cudaMalloc), else its VMM allocations (vmm.h), else kind kNone
// with the reason (reported by the peer that tries to use it).
CudaExport ExportPiece(const Piece& p, int device) {
  DeviceGuard guard(device);
  CudaExport e;
  e.key = p.key;
  e.device = device;
  e.piece_base = e.alloc_base = p.base;
  e.piece_len = e.alloc_len = p.len;
  unsigned long long base = 0;
  size_t size = 0;
  Status s;
  if (Driver().address_range != nullptr && Driver().address_range(&base, &size, p.base) == 0 &&
      LegacyIpcCapable(base)) {
    if (p.len > size || p.base - base > size - p.len) {
      s = Status::NotSupported("the registered range spans more than one cudaMalloc allocation");
    } else {
      e.alloc_base = base;
      e.alloc_len = size;
      cudaIpcMemHandle_t h{};
      static_assert(sizeof(h) == sizeof(e.handle));
      if (cudaIpcGetMemHandle(&h, reinterpret_cast<void*>(base)) == cudaSuccess) {
        std::memcpy(e.handle.data(), &h, sizeof(h));
        return e;
      }
      e.alloc_base = p.base;
      e.alloc_len = p.len;
    }
  }
  (void)cudaGetLastError();
  if (s.ok()) {
    CudaExport vmm = e;
    s = ExportVmm(&vmm);
    if (s.ok()) return vmm;
  }
  e.kind = ExportKind::kNone;  // the entry stays well-formed: alloc = piece
  e.reason = s.message();
  return e;
}

class CudaTransport final : public Transport {
 public:
  explicit CudaTransport(AgentContext* ctx)
      : ctx_(ctx),
        server_(ctx, [this](uint64_t key, uint32_t index) { return ExportFd(key, index); }) {}
  ~CudaTransport() override {
    Stop();
    // The channels are closed. A record table left to a wedged GPU (a post
    // poisoned at close) stays mapped: the GPU may still write a record there.
    if (records_dev_ != nullptr && !ctx_->records->abandoned())
      (void)cudaHostUnregister(ctx_->records->base());
  }

  const char* name() const override { return "cuda"; }

  Status Start() override {
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {  // no driver or no GPU: reach nobody
      (void)cudaGetLastError();
      inert_ = e != cudaSuccess ? std::string("no CUDA device is usable (cudaGetDeviceCount: ") +
                                      cudaGetErrorString(e) + ")"
                                : "no CUDA device is visible";
      return Status::Ok();
    }
    socket_ = ControlSocketName(ctx_->agent_id);
    KVLANE_RETURN_IF_ERROR(server_.Start(socket_));
    devices_ = static_cast<uint32_t>(n);
    ctx_->registry->SetRemoveHook([this](const std::vector<Piece>& gone) { Revoke(gone); });
    // An agent of this process is reached through peer access, its pieces
    // checked in its registry (CudaChannel::OpenRemote), not through IPC
    // handles, which CUDA does not open in the process that made them.
    PublishLocal(ctx_->agent_id, std::make_shared<LocalEndpoint>(LocalEndpoint{
                                     ctx_->name, ctx_->registry, ctx_->notifs, false}));
    return Status::Ok();
  }

  std::string Inert() const override { return inert_; }

  void Export(AgentMeta* self) const override {
    if (devices_ == 0) return;
    CudaBlob b{socket_, devices_, {}};
    std::lock_guard lock(mu_);
    for (const Piece& p : ctx_->registry->Pieces()) {
      if (p.kind != MemoryKind::kCuda) continue;
      auto it = exports_.find(p.key);
      if (it == exports_.end()) {
        cudaPointerAttributes a{};
        if (cudaPointerGetAttributes(&a, reinterpret_cast<void*>(p.base)) != cudaSuccess ||
            a.type != cudaMemoryTypeDevice) {
          (void)cudaGetLastError();
          continue;  // pinned host memory: not reachable from another process
        }
        it = exports_.emplace(p.key, ExportPiece(p, a.device)).first;
      }
      b.exports.push_back(it->second);
    }
    self->cuda_blob = EncodeCudaBlob(b);
  }

  // Device memory on either side, and pinned host memory on both.
  bool CanMove(MemoryKind, MemoryKind) const override { return true; }

  bool CanReach(const AgentMeta& peer) const override {
    if (devices_ == 0 || peer.cuda_blob.empty() || peer.boot_id != BootId()) return false;
    auto b = DecodeCudaBlob(peer.cuda_blob);
    return b.ok() && b->devices > 0 && !b->socket.empty();
  }

  Result<std::unique_ptr<Channel>> Connect(const AgentMeta& peer) override {
    KVLANE_ASSIGN_OR_RETURN(CudaBlob b, DecodeCudaBlob(peer.cuda_blob));
    KVLANE_ASSIGN_OR_RETURN(Fd fd, DialControl(*ctx_, peer, b.socket));
    return CudaChannel::Open(*ctx_, peer, LocalDevice(), std::move(fd), MappedRecords());
  }

  void Stop() override {
    if (devices_ == 0) return;
    UnpublishLocal(ctx_->agent_id);
    ctx_->registry->SetRemoveHook(nullptr);
    server_.Stop();
  }

 private:
  // The GPU that runs this agent's copies: the device of its first registered
  // device piece, else the calling thread's current device.
  int LocalDevice() const {
    for (const Piece& p : ctx_->registry->Pieces()) {
      cudaPointerAttributes a{};
      if (p.kind == MemoryKind::kCuda &&
          cudaPointerGetAttributes(&a, reinterpret_cast<void*>(p.base)) == cudaSuccess &&
          a.type == cudaMemoryTypeDevice)
        return a.device;
    }
    (void)cudaGetLastError();
    int d = 0;
    return cudaGetDevice(&d) == cudaSuccess ? d : 0;
  }

  // The slots' terminal records, mapped for the GPUs once (nullptr when that
  // failed): a lane's GPU work then publishes a post itself, and Check sees it
  // without waiting for the lane's retire thread. The lanes also read a record
  // through the same pointer on the host (RecordLanded): only where the GPUs'
  // address of the table is its host address (unified addressing, as on every
  // 64-bit Linux system CUDA 13 supports), else the host publishes every post.
  uint8_t* MappedRecords() {
    std::lock_guard lock(mu_);
    if (records_tried_ || ctx_->records == nullptr) return records_dev_;
    records_tried_ = true;
    RecordTable& t = *ctx_->records;
    if (cudaHostRegister(t.base(), t.bytes(), cudaHostRegisterMapped | cudaHostRegisterPortable) == cudaSuccess) {
      void* dev = nullptr;
      if (cudaHostGetDevicePointer(&dev, t.base(), 0) == cudaSuccess && dev == t.base())
        records_dev_ = static_cast<uint8_t*>(dev);
      else
        (void)cudaHostUnregister(t.base());
    }
    (void)cudaGetLastError();
    return records_dev_;
  }

  // The control server's FdSource: only for a piece exported as VMM with a
  // POSIX fd and still registered; the registry's shared lock keeps it
  // registered (and its memory mapped) until the fd is made.
  Result<Fd> ExportFd(uint64_t key, uint32_t index) {
    CudaExport e;
    {
      std::lock_guard lock(mu_);
      auto it = exports_.find(key);
      if (it == exports_.end()) return Status::RemoteStale("no exported piece has this key");
      e = it->second;
    }
    if (e.kind != ExportKind::kVmm || index >= e.allocs.size() ||
        !(e.allocs[index].handles & kVmmPosixFd))
      return Status::InvalidArgument("no VMM allocation with a POSIX fd at this index");
    auto live = ctx_->registry->LockShared();
    uint8_t* ptr = nullptr;
    // Op::kRead: only "still registered". The fd grants the whole allocation,
    // writable, whatever the piece's access (docs/SECURITY.md).
    KVLANE_RETURN_IF_ERROR(
        ctx_->registry->LookupLocked(key, e.piece_base, e.piece_len, Op::kRead, &ptr));
    return ExportVmmFd(e.device, e.allocs[index].base);
  }

  void Revoke(const std::vector<Piece>& gone) {
    std::vector<uint64_t> keys;
    {
      std::lock_guard lock(mu_);
      for (const Piece& p : gone) {
        keys.push_back(p.key);
        exports_.erase(p.key);
      }
    }
    server_.Revoke(keys);
  }

  AgentContext* ctx_;
  ControlServer server_;
  std::string socket_;
  uint32_t devices_ = 0;
  std::string inert_;  // set by Start where no device is usable
  mutable std::mutex mu_;
  mutable std::unordered_map<uint64_t, CudaExport> exports_;  // GUARDED_BY(mu_)
  bool records_tried_ = false;       // GUARDED_BY(mu_)
  uint8_t* records_dev_ = nullptr;   // GUARDED_BY(mu_) until the destructor
};

}  // namespace

std::unique_ptr<Transport> MakeCudaTransport(AgentContext* ctx) {
  return std::make_unique<CudaTransport>(ctx);
}

}  // namespace kvlane::core
