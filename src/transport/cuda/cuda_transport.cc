#include "transport/cuda/cuda_transport.h"

#include <cstdio>
#include <unordered_map>

#include "core/host_info.h"
#include "transport/cuda/cuda_blob.h"
#include "transport/cuda/cuda_channel.h"
#include "transport/cuda/cuda_check.h"
#include "transport/cuda/cuda_control.h"

namespace kvlane::core {
namespace {

// Finds the allocation holding a device piece and its IPC handle.
Result<CudaExport> ExportPiece(const Piece& p) {
  cudaPointerAttributes a{};
  KVLANE_CUDA(cudaPointerGetAttributes(&a, reinterpret_cast<void*>(p.base)));
  if (a.type != cudaMemoryTypeDevice) return Status::NotSupported("not device memory");
  DeviceGuard guard(a.device);
  CudaExport e;
  e.key = p.key;
  e.device = a.device;
  e.piece_base = p.base;
  e.piece_len = p.len;
  unsigned long long base = 0;
  size_t size = 0;
  if (Driver().address_range == nullptr || Driver().address_range(&base, &size, p.base) != 0)
    return Status::Backend("cuMemGetAddressRange failed");
  e.alloc_base = base;
  e.alloc_len = size;
  KVLANE_CUDA(cudaIpcGetMemHandle(&e.handle, reinterpret_cast<void*>(base)));
  return e;
}

class CudaTransport final : public Transport {
 public:
  explicit CudaTransport(AgentContext* ctx) : ctx_(ctx), server_(ctx) {}
  ~CudaTransport() override { Stop(); }

  const char* name() const override { return "cuda"; }

  Status Start() override {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {  // no driver or no GPU: reach nobody
      (void)cudaGetLastError();
      return Status::Ok();
    }
    char buf[64];
    std::snprintf(buf, sizeof(buf), "kvlane-cuda-%016llx", static_cast<unsigned long long>(ctx_->agent_id));
    socket_ = buf;
    KVLANE_RETURN_IF_ERROR(server_.Start(socket_));
    devices_ = static_cast<uint32_t>(n);
    ctx_->registry->SetRemoveHook([this](const std::vector<Piece>& gone) { Revoke(gone); });
    return Status::Ok();
  }

  void Export(AgentMeta* self) const override {
    if (devices_ == 0) return;
    CudaBlob b{socket_, devices_, {}};
    std::lock_guard lock(mu_);
    for (const Piece& p : ctx_->registry->Pieces()) {
      if (p.kind != MemoryKind::kCuda) continue;
      auto it = exports_.find(p.key);
      if (it == exports_.end()) {
        auto e = ExportPiece(p);
        if (!e.ok()) continue;  // e.g. VMM memory: the peer reports NotSupported for it
        it = exports_.emplace(p.key, e.value()).first;
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
    return CudaChannel::Open(*ctx_, peer, LocalDevice(), std::move(fd));
  }

  void Stop() override {
    if (devices_ == 0) return;
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
  mutable std::mutex mu_;
  mutable std::unordered_map<uint64_t, CudaExport> exports_;  // GUARDED_BY(mu_)
};

}  // namespace

std::unique_ptr<Transport> MakeCudaTransport(AgentContext* ctx) {
  return std::make_unique<CudaTransport>(ctx);
}

}  // namespace kvlane::core
