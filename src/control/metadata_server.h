// MetadataServer: a small TCP listener that hands this agent's metadata blob to
// whoever asks (opt-in: the blob carries the agent's secret, so bind it only
// where every client that can reach it is trusted).
//
// Thread-safety: Start and destruction by the owner. Each client is served on a
// thread of its own (ConnSet: at most kMaxConns at once); `source` is called
// by one of them at a time.
//
// Memory and work: the blob is made again only when `version` moved since it
// was last made (an unauthenticated request costs a compare, not an encoding
// of up to 40 MiB); the server keeps the last one made. Clients served at once
// share it (a slow reader holds its copy until its reply ends, at most 60 s),
// and at most one more is being made: a crowd of slow readers costs one blob
// per version, not one each.
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
  // Counts the changes of what source() returns: read before each call of it.
  using Version = std::function<uint64_t()>;
  // Listens on "host:port" and serves `source()` to each request, made again
  // only when `version()` moved.
  static Result<std::unique_ptr<MetadataServer>> Start(const std::string& host_port, Source source,
                                                       Version version);
  ~MetadataServer() { conns_.Stop(); }
  uint16_t port() const { return port_; }

 private:
  struct Conn {
    Fd fd;
    std::thread thread;
    bool done = false;  // GUARDED_BY(conns_.mu())
  };
  MetadataServer(uint16_t port, Source source, Version version)
      : port_(port), source_(std::move(source)), version_(std::move(version)) {}
  void Serve(Conn* c);
  // The blob of the current version, made by source() if it is not yet.
  // Throws std::bad_alloc as source() does.
  std::shared_ptr<const std::string> CurrentBlob();

  const uint16_t port_;
  const Source source_;
  const Version version_;
  std::mutex blob_mu_;                       // one source() at a time
  std::shared_ptr<const std::string> made_;  // GUARDED_BY(blob_mu_)
  uint64_t made_version_ = 0;                // of made_; GUARDED_BY(blob_mu_)
  ConnSet<Conn> conns_;  // last: stopped (threads joined) before the members above go
};

}  // namespace kvlane::core
