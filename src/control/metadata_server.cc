#include "control/metadata_server.h"

#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <new>

#include "kvlane/agent.h"
#include "transport/stream/fd_passing.h"

namespace kvlane::core {
namespace {

constexpr std::chrono::milliseconds kClientTimeout{2000};
constexpr std::chrono::seconds kReplyTimeout{60};

}  // namespace

std::shared_ptr<const std::string> MetadataServer::CurrentBlob() {
  std::lock_guard lock(blob_mu_);
  // Read before source(): a blob made meanwhile of a newer table is labelled
  // with the older count, and made again at the next request.
  const uint64_t v = version_();
  if (made_ != nullptr && made_version_ == v) return made_;
  made_.reset();  // let go of the old one first: one blob made at a time, at most two held
  made_ = std::make_shared<const std::string>(source_());
  made_version_ = v;
  return made_;
}

// The request must arrive within kClientTimeout as a whole (a client that
// trickles it is cut); the reply within kReplyTimeout (the largest blob, about
// 40 MiB, at a few MB/s), each send giving up after kClientTimeout without
// progress, so that a client reading slowly holds a thread and its share of
// the blob for a bounded time.
void MetadataServer::Serve(Conn* c) {
  const int fd = c->fd.get();
  char req[sizeof(kMetadataRequest)];
  if (RecvWithFd(fd, req, sizeof(req), nullptr, DeadlineIn(kClientTimeout)).ok() &&
      std::memcmp(req, kMetadataRequest, sizeof(req)) == 0 &&
      SetIoTimeout(fd, kClientTimeout).ok()) {
    std::shared_ptr<const std::string> blob;
    try {
      blob = CurrentBlob();
    } catch (const std::bad_alloc&) {  // drops this client, not the process
    }
    if (blob != nullptr) {
      uint32_t n = static_cast<uint32_t>(blob->size());
      iovec v[2] = {{&n, sizeof(n)}, {const_cast<char*>(blob->data()), blob->size()}};
      (void)SendIov(fd, v, 2, DeadlineIn(kReplyTimeout));
    }
  }
  shutdown(fd, SHUT_RDWR);
  conns_.Finish(c);
}

Result<std::unique_ptr<MetadataServer>> MetadataServer::Start(const std::string& host_port,
                                                              Source source, Version version) {
  std::string host;
  uint16_t port = 0;
  KVLANE_RETURN_IF_ERROR(SplitHostPort(host_port, &host, &port));
  uint16_t bound = 0;
  KVLANE_ASSIGN_OR_RETURN(Fd fd, ListenTcp(host, port, &bound));
  std::unique_ptr<MetadataServer> server(
      new MetadataServer(bound, std::move(source), std::move(version)));
  KVLANE_RETURN_IF_ERROR(
      server->conns_.Start(std::move(fd), [p = server.get()](Conn* c) { p->Serve(c); }));
  return server;
}

}  // namespace kvlane::core

namespace kvlane {

Result<std::string> FetchMetadata(const std::string& host_port, std::chrono::milliseconds timeout) {
  if (timeout < std::chrono::milliseconds(1) || timeout > std::chrono::hours(24))
    return Status::InvalidArgument("FetchMetadata: the timeout must be 1 ms..24 h, got " +
                                   std::to_string(timeout.count()) + " ms");
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
  // Grown as the bytes come, at most 1 MiB ahead of them: a listener that
  // announces 256 MiB and sends nothing costs no more than a small blob.
  std::string blob;
  while (blob.size() < n) {
    const size_t at = blob.size(), step = std::min<size_t>(n - at, size_t{1} << 20);
    blob.resize(at + step);
    KVLANE_RETURN_IF_ERROR(core::RecvWithFd(fd.get(), blob.data() + at, step, nullptr, by));
  }
  return blob;
}

}  // namespace kvlane
