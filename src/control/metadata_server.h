// MetadataServer: a small TCP listener that hands this agent's metadata blob to
// whoever asks (opt-in: the blob carries the agent's secret, so bind it only
// where every client that can reach it is trusted).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "kvlane/status.h"
#include "transport/stream/socket.h"

namespace kvlane::core {

inline constexpr char kMetadataRequest[8] = {'K', 'V', 'L', 'G', 'E', 'T', 'M', 'D'};

class MetadataServer {
 public:
  using Source = std::function<std::string()>;
  // Listens on "host:port" and serves `source()` to each request.
  static Result<std::unique_ptr<MetadataServer>> Start(const std::string& host_port, Source source);
  ~MetadataServer();
  uint16_t port() const { return port_; }

 private:
  MetadataServer(Fd fd, uint16_t port, Source source);
  void Loop();

  Fd fd_;
  uint16_t port_;
  Source source_;
  std::thread thread_;
};

}  // namespace kvlane::core
