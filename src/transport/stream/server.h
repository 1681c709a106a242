// StreamServer: the target side of tcp and shm. Accepts connections, checks the
// Hello against this agent's id and secret, then serves frames in order,
// bounds-checking every segment against the live registration table.
//
// Thread-safety: Start/Stop from the owner; one thread per connection.
#pragma once

#include <atomic>
#include <list>
#include <memory>
#include <mutex>
#include <thread>

#include "transport/stream/socket.h"
#include "transport/transport.h"

namespace kvlane::core {

enum class PayloadMode : uint8_t {
  kInline = 0,  // tcp: payload bytes travel in the stream
  kCma = 1,     // shm: the target copies with process_vm_readv/writev
};

class StreamServer {
 public:
  // Connections served at once (each holds a thread); more are closed at accept.
  static constexpr size_t kMaxConns = 4096;

  StreamServer(AgentContext* ctx, PayloadMode mode) : ctx_(ctx), mode_(mode) {}
  ~StreamServer() { Stop(); }

  // Takes ownership of a listening socket and starts accepting.
  void Start(Fd listener);
  void Stop();

 private:
  struct Conn {
    Fd fd;
    std::thread thread;
    std::atomic<bool> done{false};
  };
  void AcceptLoop();
  void Serve(Conn* c);

  AgentContext* ctx_;
  const PayloadMode mode_;
  Fd listener_;
  std::thread accept_thread_;
  std::mutex mu_;
  std::list<std::unique_ptr<Conn>> conns_;  // GUARDED_BY(mu_)
  bool stopped_ = false;                    // GUARDED_BY(mu_)
};

}  // namespace kvlane::core
