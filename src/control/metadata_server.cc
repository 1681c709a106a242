#include "control/metadata_server.h"

#include <sys/socket.h>

#include <cstring>

#include "kvlane/agent.h"
#include "transport/stream/fd_passing.h"

namespace kvlane::core {
namespace {

constexpr uint32_t kMaxBlob = 256u << 20;

void ServeOne(int fd, const MetadataServer::Source& source) {
  char req[sizeof(kMetadataRequest)];
  // Served on the accept thread: a client that stops reading must not block it.
  if (!SetIoTimeout(fd, std::chrono::milliseconds(2000)).ok()) return;
  if (!WaitReadable(fd, std::chrono::milliseconds(2000)).ok()) return;
  if (!RecvAll(fd, req, sizeof(req)).ok() || std::memcmp(req, kMetadataRequest, sizeof(req)) != 0) return;
  std::string blob = source();
  uint32_t n = static_cast<uint32_t>(blob.size());
  iovec v[2] = {{&n, sizeof(n)}, {blob.data(), blob.size()}};
  (void)SendIov(fd, v, 2);
}

}  // namespace

MetadataServer::MetadataServer(Fd fd, uint16_t port, Source source)
    : fd_(std::move(fd)), port_(port), source_(std::move(source)) {
  thread_ = std::thread([this] { Loop(); });
}

Result<std::unique_ptr<MetadataServer>> MetadataServer::Start(const std::string& host_port, Source source) {
  std::string host;
  uint16_t port = 0;
  KVLANE_RETURN_IF_ERROR(SplitHostPort(host_port, &host, &port));
  uint16_t bound = 0;
  KVLANE_ASSIGN_OR_RETURN(Fd fd, ListenTcp(host, port, &bound));
  return std::unique_ptr<MetadataServer>(new MetadataServer(std::move(fd), bound, std::move(source)));
}

MetadataServer::~MetadataServer() {
  shutdown(fd_.get(), SHUT_RDWR);
  thread_.join();
}

void MetadataServer::Loop() {
  for (;;) {
    auto c = Accept(fd_.get());
    if (!c.ok()) {
      if (c.status().code() == Code::kCanceled) return;
      continue;
    }
    ServeOne(c->get(), source_);
  }
}

}  // namespace kvlane::core

namespace kvlane {

Result<std::string> FetchMetadata(const std::string& host_port, std::chrono::milliseconds timeout) {
  std::string host;
  uint16_t port = 0;
  KVLANE_RETURN_IF_ERROR(core::SplitHostPort(host_port, &host, &port));
  // One deadline for the whole call: a listener that stalls half way through
  // its reply, or trickles it, cannot hold the caller past it. (No descriptor
  // rides on tcp: the *WithFd calls are the deadline-bounded socket I/O.)
  const core::Deadline by = core::DeadlineIn(timeout);
  KVLANE_ASSIGN_OR_RETURN(core::Fd fd, core::ConnectTcp(host, port, timeout));
  KVLANE_RETURN_IF_ERROR(
      core::SendWithFd(fd.get(), core::kMetadataRequest, sizeof(core::kMetadataRequest), -1, by));
  uint32_t n = 0;
  KVLANE_RETURN_IF_ERROR(core::RecvWithFd(fd.get(), &n, sizeof(n), nullptr, by));
  if (n == 0 || n > (256u << 20)) return Status::InvalidArgument("metadata listener sent a bad length");
  std::string blob(n, '\0');
  KVLANE_RETURN_IF_ERROR(core::RecvWithFd(fd.get(), blob.data(), n, nullptr, by));
  return blob;
}

}  // namespace kvlane
