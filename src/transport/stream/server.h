// StreamServer: the target side of tcp and shm. Accepts connections, runs the
// handshake (handshake.h: challenge, Hello checked against this agent's id and
// secret, reply with our own proof; at most max_conns_per_peer connections per
// peer name, counted with the agent's other servers: PeerConnLimit), then serves
// frames in order, bounds-checking every
// segment against the live registration table.
//
// Thread-safety: Start/Stop from the owner; one thread per connection.
#pragma once

#include <sys/types.h>

#include <cassert>
#include <memory>
#include <thread>

#include "transport/conn_set.h"
#include "transport/peer_conn_limit.h"
#include "transport/stream/socket.h"
#include "transport/transport.h"

namespace kvlane::core {

enum class PayloadMode : uint8_t {
  kInline = 0,  // tcp: payload bytes travel in the stream
  kCma = 1,     // shm: the target copies with process_vm_readv/writev
};

class StreamServer {
 public:
  // REQUIRES: ctx->peer_conns != nullptr.
  StreamServer(AgentContext* ctx, PayloadMode mode)
      : ctx_(ctx), mode_(mode), peer_conns_(ctx->peer_conns) {
    assert(peer_conns_ != nullptr);
  }
  ~StreamServer() { Stop(); }

  // Takes ownership of a listening socket and starts accepting.
  Status Start(Fd listener) {
    return conns_.Start(std::move(listener), [this](Conn* c) { Serve(c); });
  }
  void Stop() { conns_.Stop(); }

 private:
  struct Conn {
    Fd fd;
    std::thread thread;
    bool done = false;  // GUARDED_BY(conns_.mu())
  };
  void Serve(Conn* c);
  // The handshake, then frames until the connection ends; returns holding no slot.
  void Run(int fd, pid_t pid);

  AgentContext* ctx_;
  const PayloadMode mode_;
  // The agent's, shared with its other servers; slots held by connection threads:
  // outlives conns_ below.
  const std::shared_ptr<PeerConnLimit> peer_conns_;
  ConnSet<Conn> conns_;  // last: stopped (threads joined) before the members above go
};

}  // namespace kvlane::core
