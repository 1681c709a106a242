// The cuda transport's control path: a unix-socket connection per initiator,
// opened with the stream transports' Hello (target id + per-agent secret), then
// small frames both ways:
//   initiator -> target: kNotify (payload), kRevokeAck (seq)
//   target -> initiator: kNotifyAck (status), kRevoke (piece keys, seq)
// The target revokes pieces on DeregisterMemory and waits for every initiator
// to acknowledge, which each does once nothing it launched can touch them.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>

#include "transport/stream/socket.h"
#include "transport/transport.h"

namespace kvlane::core {

enum class CtlType : uint32_t { kNotify = 1, kNotifyAck = 2, kRevoke = 3, kRevokeAck = 4 };

struct CtlFrame {
  uint32_t type;  // CtlType
  uint32_t len;   // payload bytes that follow
  uint64_t seq;   // kRevoke/kRevokeAck: revocation number; kNotifyAck: status (int32)
};
static_assert(sizeof(CtlFrame) == 16);

inline constexpr uint32_t kMaxCtlPayload = 1u << 20;
inline constexpr uint32_t kMaxRevokeKeys = kMaxCtlPayload / 8;

// Sends one frame (header + payload).
Status SendCtl(int fd, CtlType type, uint64_t seq, const void* payload, uint32_t len);
// Reads one frame header and its payload (at most kMaxCtlPayload bytes) into `payload`.
Status RecvCtl(int fd, CtlFrame* frame, std::string* payload);

// Dials `socket` and authenticates as an initiator of `peer`.
Result<Fd> DialControl(const AgentContext& ctx, const AgentMeta& peer, const std::string& socket);

// Target side. Thread-safety: Revoke from any thread; Start/Stop from the owner.
class ControlServer {
 public:
  explicit ControlServer(AgentContext* ctx) : ctx_(ctx) {}
  ~ControlServer() { Stop(); }

  Status Start(const std::string& socket);
  void Stop();
  // Tells every connected initiator that `keys` are gone and waits (up to
  // io_timeout) for each to acknowledge; an initiator that does not is cut off.
  void Revoke(std::span<const uint64_t> keys);

 private:
  struct Conn {
    Fd fd;
    std::thread thread;
    std::mutex write_mu;
    uint64_t acked = 0;  // GUARDED_BY(ControlServer::mu_)
    bool done = false;   // GUARDED_BY(ControlServer::mu_)
  };
  void AcceptLoop();
  void Serve(Conn* c);

  AgentContext* ctx_;
  Fd listener_;
  std::thread accept_thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::list<std::unique_ptr<Conn>> conns_;  // GUARDED_BY(mu_)
  uint64_t revoke_seq_ = 0;                 // GUARDED_BY(mu_)
  bool stopped_ = false;                    // GUARDED_BY(mu_)
};

}  // namespace kvlane::core
