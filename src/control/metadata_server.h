// MetadataServer: a small TCP listener that hands this agent's metadata blob to
// whoever asks (opt-in: the blob carries the agent's secret, so bind it only
// where every client that can reach it is trusted).
//
// Thread-safety: Start and destruction by the owner. Each client is served on a
// thread of its own (ConnSet: at most kMaxConns at once); `source` is called
// by one of them at a time.
//
// Memory: clients served at once share one copy of the blob while it does not
// change (a slow reader holds it until its reply ends, at most 60 s), and at
// most one more is being made: a crowd of slow readers costs one blob, not one
// each.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "kvlane/status.h"
#include "transport/conn_set.h"
#include "transport/stream/socket.h"

namespace kvlane::core {

inline constexpr char kMetadataRequest[8] = {'K', 'V', 'L', 'G', 'E', 'T', 'M', 'D'};

class MetadataServer {
 public:
  using Source = std::function<std::string()>;
  // Listens on "host:port" and serves `source()` to each request.
  static Result<std::unique_ptr<MetadataServer>> Start(const std::string& host_port, Source source);
  ~MetadataServer() { conns_.Stop(); }
  uint16_t port() const { return port_; }

 private:
  struct Conn {
    Fd fd;
    std::thread thread;
    bool done = false;  // GUARDED_BY(conns_.mu())
  };
  MetadataServer(uint16_t port, Source source) : port_(port), source_(std::move(source)) {}
  void Serve(Conn* c);
  // The current blob from source(), shared with the clients still being sent
  // an identical one. Throws std::bad_alloc as source() does.
  std::shared_ptr<const std::string> CurrentBlob();

  const uint16_t port_;
  const Source source_;
  std::mutex blob_mu_;                       // one source() at a time
  std::weak_ptr<const std::string> shared_;  // GUARDED_BY(blob_mu_)
  ConnSet<Conn> conns_;  // last: stopped (threads joined) before the members above go
};

}  // namespace kvlane::core
