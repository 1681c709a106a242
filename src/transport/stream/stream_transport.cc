#include "transport/stream/stream_transport.h"

#include <cstdio>

#include "core/device_copier.h"
#include "core/host_info.h"
#include "transport/stream/handshake.h"
#include "transport/stream/keepalive.h"
#include "transport/stream/server.h"
#include "transport/stream/stream_channel.h"

namespace kvlane::core {
namespace {

bool IsWildcard(const std::string& host) {
  return host.empty() || host == "0.0.0.0" || host == "::";
}

class StreamTransport final : public Transport {
 public:
  StreamTransport(AgentContext* ctx, PayloadMode mode)
      : ctx_(ctx), mode_(mode), server_(ctx, mode) {}
  ~StreamTransport() override { server_.Stop(); }

  const char* name() const override { return mode_ == PayloadMode::kCma ? "shm" : "tcp"; }

  Status Start() override {
    if (mode_ == PayloadMode::kCma) {
      char buf[64];
      std::snprintf(buf, sizeof(buf), "kvlane-%016llx",
                    static_cast<unsigned long long>(ctx_->agent_id));
      socket_name_ = buf;
      KVLANE_ASSIGN_OR_RETURN(Fd fd, ListenUnix(socket_name_));
      return server_.Start(std::move(fd));
    }
    const AgentOptions& o = ctx_->options;
    KVLANE_ASSIGN_OR_RETURN(Fd fd, ListenTcp(o.tcp_listen_host, o.tcp_listen_port, &port_));
    host_ = !o.tcp_advertise_host.empty()   ? o.tcp_advertise_host
            : IsWildcard(o.tcp_listen_host) ? HostName()
                                            : o.tcp_listen_host;
    return server_.Start(std::move(fd));
  }

  void Export(AgentMeta* self) const override {
    if (mode_ == PayloadMode::kCma) {
      self->shm_socket = socket_name_;
    } else {
      self->tcp_host = host_;
      self->tcp_port = port_;
    }
  }

  // tcp moves device memory through pinned host buffers on either side: the
  // local side needs a GPU here; a target without one refuses each frame
  // (kNotSupported). shm moves host memory only.
  bool CanMove(MemoryKind local, MemoryKind remote) const override {
    if (local == MemoryKind::kHost && remote == MemoryKind::kHost) return true;
    if (mode_ == PayloadMode::kCma) return false;
    return local == MemoryKind::kHost || ProcessDeviceStaging() != nullptr;
  }
  bool Stages(MemoryKind local, MemoryKind remote) const override {
    return local == MemoryKind::kCuda || remote == MemoryKind::kCuda;
  }

  bool CanReach(const AgentMeta& peer) const override {
    if (mode_ == PayloadMode::kCma) return !peer.shm_socket.empty() && peer.boot_id == BootId();
    return !peer.tcp_host.empty() && peer.tcp_port != 0;
  }

  Result<std::unique_ptr<Channel>> Connect(const AgentMeta& peer) override {
    auto dial = [this, &peer](ConnRole role, Deadline by) -> Result<Fd> {
      auto fd = mode_ == PayloadMode::kCma ? ConnectUnix(peer.shm_socket, by)
                                           : ConnectTcp(peer.tcp_host, peer.tcp_port, by);
      if (!fd.ok()) return fd.status();
      // shm: the target copies this process's memory itself, and refuses
      // (closing at once) an initiator of another user: say so here.
      if (mode_ == PayloadMode::kCma) {
        const uid_t uid = PeerCred(fd->get()).uid;
        if (uid != geteuid())
          return Status::NotAllowed(
              "shm: peer '" + peer.name + "' runs as uid " +
              (uid == static_cast<uid_t>(-1) ? std::string("unknown") : std::to_string(uid)) +
              ", this process as uid " + std::to_string(geteuid()) +
              ": shm needs one user on both ends (enable tcp for this peer)");
      }
      if (mode_ == PayloadMode::kInline)
        KVLANE_RETURN_IF_ERROR(SetKeepalive(fd->get(), KeepaliveFor(ctx_->options)));
      KVLANE_RETURN_IF_ERROR(SayHello(*ctx_, peer, fd->get(), role, by));
      return std::move(fd).value();
    };
    return StreamChannel::Open(*ctx_, mode_, name(), dial);
  }

  void Stop() override { server_.Stop(); }

 private:
  AgentContext* ctx_;
  const PayloadMode mode_;
  StreamServer server_;
  std::string socket_name_;
  std::string host_;
  uint16_t port_ = 0;
};

}  // namespace

std::unique_ptr<Transport> MakeTcpTransport(AgentContext* ctx) {
  return std::make_unique<StreamTransport>(ctx, PayloadMode::kInline);
}

std::unique_ptr<Transport> MakeShmTransport(AgentContext* ctx) {
  return std::make_unique<StreamTransport>(ctx, PayloadMode::kCma);
}

}  // namespace kvlane::core
