// The cuda transport's control path: a unix-socket connection per initiator,
// opened with the stream transports' Hello (target id + per-agent secret), then
// small frames both ways:
//   initiator -> target: kNotify (payload), kRevokeAck (seq), kFdRequest (key, index)
//   target -> initiator: kNotifyAck (status), kRevoke (piece keys, seq),
//                        kFdReply (status; an fd attached with SCM_RIGHTS when ok)
// The target revokes pieces on DeregisterMemory and waits for every initiator
// to acknowledge, which each does once nothing it launched can touch them.
// File descriptors of VMM allocations are asked for on a short-lived connection
// of their own (FetchPeerFd), so the channel's control thread never sees one.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>

#include "transport/conn_set.h"
#include "transport/stream/socket.h"
#include "transport/transport.h"

namespace kvlane::core {

enum class CtlType : uint32_t {
  kNotify = 1,
  kNotifyAck = 2,
  kRevoke = 3,
  kRevokeAck = 4,
  kFdRequest = 5,
  kFdReply = 6,
};

struct CtlFrame {
  uint32_t type;  // CtlType
  uint32_t len;   // payload bytes that follow
  uint64_t seq;   // kRevoke/kRevokeAck: revocation number; kNotifyAck, kFdReply: status (int32)
};
static_assert(sizeof(CtlFrame) == 16);

inline constexpr uint32_t kMaxCtlPayload = 1u << 20;
inline constexpr uint32_t kMaxRevokeKeys = kMaxCtlPayload / 8;

// Sends one frame (header + payload).
Status SendCtl(int fd, CtlType type, uint64_t seq, const void* payload, uint32_t len);
// Reads one frame header and its payload (at most kMaxCtlPayload bytes) into `payload`.
Status RecvCtl(int fd, CtlFrame* frame, std::string* payload);

// Dials `socket` and authenticates as `self_name`, an initiator of `peer`
// (its name, agent_id and secret are used).
Result<Fd> DialControl(const std::string& self_name, std::chrono::milliseconds connect_timeout,
                       const AgentMeta& peer, const std::string& socket);
inline Result<Fd> DialControl(const AgentContext& ctx, const AgentMeta& peer,
                              const std::string& socket) {
  return DialControl(ctx.name, ctx.options.connect_timeout, peer, socket);
}

// kFdRequest payload: the piece key and the index of the VMM allocation under it.
struct FdRequest {
  uint64_t key;
  uint32_t index;
  uint32_t reserved;  // zero
};
static_assert(sizeof(FdRequest) == 16);

// Where and as whom to ask a peer for a VMM allocation's file descriptor.
struct FdPeer {
  std::string self_name;
  AgentMeta peer;  // name, agent_id and secret
  std::string socket;
  std::chrono::milliseconds connect_timeout{5000};
  std::chrono::milliseconds io_timeout{10000};
};
// Dials the peer, asks for allocation `index` of piece `key` and returns the fd
// it sends (the caller closes it). The peer's refusal comes back as its status.
Result<Fd> FetchPeerFd(const FdPeer& p, uint64_t key, uint32_t index);

// Target side: the fd of allocation `index` under piece `key`, for an
// authenticated peer. Must refuse keys not registered (or deregistered).
using FdSource = std::function<Result<Fd>(uint64_t key, uint32_t index)>;

// Target side. Thread-safety: Revoke from any thread; Start/Stop from the owner.
class ControlServer {
 public:
  // `fds` answers kFdRequest (empty: every request is refused).
  explicit ControlServer(AgentContext* ctx, FdSource fds = {}) : ctx_(ctx), fds_(std::move(fds)) {}
  ~ControlServer() { Stop(); }

  Status Start(const std::string& socket);
  void Stop() { conns_.Stop(); }
  // Tells every connected initiator that `keys` are gone and waits (up to
  // io_timeout) for each to acknowledge; an initiator that does not is cut off.
  void Revoke(std::span<const uint64_t> keys);

 private:
  struct Conn {
    Fd fd;
    std::thread thread;
    std::mutex write_mu;
    uint64_t acked = 0;  // GUARDED_BY(conns_.mu())
    bool done = false;   // GUARDED_BY(conns_.mu())
  };
  void Serve(Conn* c);
  Status ServeFd(Conn* c, const std::string& request);  // fd_request.cc

  AgentContext* ctx_;
  const FdSource fds_;
  uint64_t revoke_seq_ = 0;  // GUARDED_BY(conns_.mu())
  ConnSet<Conn> conns_;      // last: stopped (threads joined) before the members above go
};

}  // namespace kvlane::core
