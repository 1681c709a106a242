#include "control_channel.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string_view>
#include <thread>

#include "control_secret.h"
#include "json_field.h"

namespace kvbench {
namespace {

constexpr size_t kMacBytes = 32;  // HMAC-SHA256: ControlChannel::Seal

using Clock = std::chrono::steady_clock;
constexpr uint32_t kMaxMessage = 256u << 20;

kvlane::Status Errno(const std::string& what) {
  return kvlane::Status::Backend("control: " + what + ": " + std::strerror(errno));
}

kvlane::Result<addrinfo*> Resolve(const std::string& host_port, bool passive) {
  std::string host;
  uint16_t port = 0;
  KVLANE_RETURN_IF_ERROR(SplitHostPort(host_port, &host, &port));
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
  if (rc != 0) {
    return kvlane::Status::InvalidArgument("control: cannot resolve " + host_port + ": " +
                                           gai_strerror(rc));
  }
  return res;
}

void SetNoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

kvlane::Result<int> ListenOn(const std::string& host_port) {
  KVLANE_ASSIGN_OR_RETURN(addrinfo * res, Resolve(host_port, true));
  int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  bool ok = fd >= 0 && bind(fd, res->ai_addr, res->ai_addrlen) == 0 && listen(fd, 8) == 0;
  freeaddrinfo(res);
  if (!ok) {
    kvlane::Status s = Errno("listen on " + host_port);
    if (fd >= 0) close(fd);
    return s;
  }
  return fd;
}

// Runs the notice every notice.every of a wait that started at construction;
// Next() says until when the caller may block before the next one is due.
class WaitTicker {
 public:
  explicit WaitTicker(const WaitNotice& notice)
      : notice_(notice), every_(std::max(notice.every, std::chrono::milliseconds(1))) {}
  Clock::time_point Next() const { return next_; }
  void Tick() {
    const auto now = Clock::now();
    if (now < next_) return;
    if (notice_.call)
      notice_.call(std::chrono::duration_cast<std::chrono::milliseconds>(now - start_));
    while (next_ <= now) next_ += every_;
  }

 private:
  const WaitNotice& notice_;
  const std::chrono::milliseconds every_;
  const Clock::time_point start_ = Clock::now();
  Clock::time_point next_ = start_ + every_;
};

int MsUntil(Clock::time_point t) {
  auto ms = std::chrono::ceil<std::chrono::milliseconds>(t - Clock::now()).count();
  return static_cast<int>(std::max<int64_t>(ms, 0));
}

// One connect attempt, bounded by `deadline`: a host that drops SYNs (a
// firewall, a wrong address) would hold a blocking connect for the kernel's
// two minutes of retries, silent and past the timeout. The ticker's notices run
// while it waits. The socket is blocking again on success; -1 with errno set
// on failure (ETIMEDOUT at the deadline).
int TryConnect(const addrinfo* ai, Clock::time_point deadline, WaitTicker& ticker) {
  int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -1;
  int err = connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 ? 0 : errno;
  while (err == EINPROGRESS || err == EINTR) {  // EINTR: the connect goes on, as EINPROGRESS
    ticker.Tick();
    pollfd p{fd, POLLOUT, 0};
    const int prc = poll(&p, 1, MsUntil(std::min(deadline, ticker.Next())));
    if (prc < 0 && errno != EINTR) {
      err = errno;
    } else if (prc > 0) {
      socklen_t len = sizeof(err);
      if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    } else if (prc == 0 && Clock::now() >= deadline) {
      err = ETIMEDOUT;  // checked after a poll: an answer already there still counts
    }
  }
  if (err == 0 && ConnectedToItself(fd)) err = ECONNREFUSED;  // retried: nobody listens yet
  if (err == 0 && fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0) err = errno;
  if (err == 0) return fd;
  close(fd);
  errno = err;
  return -1;
}

// One end of a connected socket: its host as text and its port.
struct Endpoint {
  std::string host;
  uint16_t port = 0;
};

// getpeername (peer) or getsockname (this end), IPv4 or IPv6.
kvlane::Result<Endpoint> EndpointOf(int fd, bool peer) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  auto* sa = reinterpret_cast<sockaddr*>(&addr);
  if ((peer ? getpeername(fd, sa, &len) : getsockname(fd, sa, &len)) != 0) {
    return Errno(peer ? "getpeername" : "getsockname");
  }
  char host[INET6_ADDRSTRLEN] = {};
  Endpoint e;
  const char* text = nullptr;
  if (addr.ss_family == AF_INET) {
    auto* a = reinterpret_cast<sockaddr_in*>(&addr);
    text = inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
    e.port = ntohs(a->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&addr);
    text = inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
    e.port = ntohs(a->sin6_port);
  } else {
    return kvlane::Status::InvalidArgument("control: socket of family " +
                                           std::to_string(addr.ss_family) + ", not IPv4 or IPv6");
  }
  if (text == nullptr) return Errno("inet_ntop");
  e.host = text;
  return e;
}

}  // namespace

bool ConnectedToItself(int fd) {
  const auto here = EndpointOf(fd, /*peer=*/false), there = EndpointOf(fd, /*peer=*/true);
  return here.ok() && there.ok() && here->port == there->port && here->host == there->host;
}

kvlane::Status SplitHostPort(const std::string& host_port, std::string* host, uint16_t* port) {
  size_t colon = host_port.rfind(':');
  if (colon == std::string::npos || colon + 1 == host_port.size()) {
    return kvlane::Status::InvalidArgument("expected HOST:PORT, got '" + host_port + "'");
  }
  char* end = nullptr;
  unsigned long p = std::strtoul(host_port.c_str() + colon + 1, &end, 10);
  if (*end != '\0' || p > 65535) {
    return kvlane::Status::InvalidArgument("bad port in '" + host_port + "'");
  }
  *host = host_port.substr(0, colon);
  *port = static_cast<uint16_t>(p);
  return kvlane::Status::Ok();
}

kvlane::Result<std::unique_ptr<ControlListener>> ControlListener::Listen(
    const std::string& host_port) {
  KVLANE_ASSIGN_OR_RETURN(int fd, ListenOn(host_port));
  auto listener = std::unique_ptr<ControlListener>(new ControlListener(fd, host_port));
  if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) != 0)
    return Errno("fcntl on the listener");
  return listener;
}

kvlane::Result<std::unique_ptr<ControlListener>> ControlListener::Adopt(int fd,
                                                                        std::string host_port) {
  auto option = [fd](int name) {  // -1 when it cannot be read (not a socket, closed)
    int value = 0;
    socklen_t len = sizeof(value);
    return getsockopt(fd, SOL_SOCKET, name, &value, &len) == 0 ? value : -1;
  };
  if (option(SO_ACCEPTCONN) != 1 || option(SO_TYPE) != SOCK_STREAM) {
    return kvlane::Status::InvalidArgument("control: descriptor " + std::to_string(fd) +
                                           " handed down for " + host_port +
                                           " is no listening TCP socket");
  }
  if (fcntl(fd, F_SETFD, FD_CLOEXEC) != 0 ||
      fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) != 0)
    return Errno("fcntl on the handed-down listener");
  return std::unique_ptr<ControlListener>(new ControlListener(fd, std::move(host_port)));
}

ControlListener::~ControlListener() {
  if (fd_ >= 0) close(fd_);
}

kvlane::Result<uint16_t> ControlListener::Port() const {
  KVLANE_ASSIGN_OR_RETURN(Endpoint e, EndpointOf(fd_, /*peer=*/false));
  return e.port;
}

kvlane::Result<std::unique_ptr<ControlChannel>> ControlListener::Accept(
    std::chrono::milliseconds timeout, const WaitNotice& notice) {
  const auto deadline = Clock::now() + timeout;
  WaitTicker ticker(notice);
  int fd = -1;
  while (fd < 0) {
    pollfd pfd{fd_, POLLIN, 0};
    int rc;
    do {
      ticker.Tick();
      rc = poll(&pfd, 1, MsUntil(std::min(deadline, ticker.Next())));
    } while ((rc < 0 && errno == EINTR) || (rc == 0 && Clock::now() < deadline));
    if (rc == 0) {
      return kvlane::Status::Timeout("control: no peer connected to " + host_port_ + " within " +
                                     std::to_string(timeout.count()) + " ms");
    }
    if (rc < 0) return Errno("poll on " + host_port_);
    // The listener does not block: a connection that went away between the
    // poll and here leaves nothing to take, and the wait goes on to its deadline.
    fd = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      return Errno("accept on " + host_port_);
  }
  SetNoDelay(fd);
  return std::unique_ptr<ControlChannel>(new ControlChannel(fd, timeout));
}

kvlane::Result<std::unique_ptr<ControlChannel>> ControlChannel::Connect(
    const std::string& host_port, std::chrono::milliseconds timeout, const WaitNotice& notice) {
  KVLANE_ASSIGN_OR_RETURN(addrinfo * res, Resolve(host_port, false));
  const auto deadline = Clock::now() + timeout;
  WaitTicker ticker(notice);
  int fd = TryConnect(res, deadline, ticker);
  bool refused = false;  // some attempt was refused: the host answers, nothing listens
  while (fd < 0 && errno == ECONNREFUSED && Clock::now() < deadline) {
    refused = true;
    ticker.Tick();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    fd = TryConnect(res, deadline, ticker);
  }
  const int err = errno;
  freeaddrinfo(res);
  if (fd < 0 && (err == ECONNREFUSED || (err == ETIMEDOUT && refused))) {
    return kvlane::Status::Timeout("control: nothing listening at " + host_port + " within " +
                                   std::to_string(timeout.count()) +
                                   " ms (connection refused): is the other rank running?");
  }
  if (fd < 0 && err == ETIMEDOUT) {
    return kvlane::Status::Timeout("control: no answer from " + host_port + " within " +
                                   std::to_string(timeout.count()) +
                                   " ms: a wrong address, or a firewall dropping the connection?");
  }
  errno = err;
  if (fd < 0) return Errno("connect to " + host_port);
  SetNoDelay(fd);
  return std::unique_ptr<ControlChannel>(new ControlChannel(fd, timeout));
}

ControlChannel::ControlChannel(int fd, std::chrono::milliseconds timeout)
    : fd_(fd), timeout_(timeout), max_message_(kMaxMessage) {}

ControlChannel::~ControlChannel() { close(fd_); }

void ControlChannel::Bound(Clock::time_point by, uint32_t max_bytes) {
  by_ = by;
  max_message_ = max_bytes;
}

void ControlChannel::Unbound() {
  by_.reset();
  max_message_ = kMaxMessage;
}

std::string ControlChannel::PeerAddress() const {
  auto e = EndpointOf(fd_, /*peer=*/true);
  if (!e.ok()) return "?";
  return e->host + ":" + std::to_string(e->port);
}

kvlane::Result<std::string> ControlChannel::LocalAddress() const {
  KVLANE_ASSIGN_OR_RETURN(Endpoint e, EndpointOf(fd_, /*peer=*/false));
  return std::move(e.host);
}

void ControlChannel::Abort() {
  if (!aborted_.exchange(true)) (void)shutdown(fd_, SHUT_RDWR);
}

kvlane::Status ControlChannel::WaitReady(short events) {
  if (aborted_) return kvlane::Status::Canceled("control: connection aborted by this rank");
  pollfd pfd{fd_, events, 0};
  const auto deadline = std::min(Clock::now() + timeout_, by_.value_or(Clock::time_point::max()));
  int rc;
  do {
    rc = poll(&pfd, 1, MsUntil(deadline));
  } while (rc < 0 && errno == EINTR);
  if (rc < 0) return Errno("poll");
  if (rc == 0 && by_.has_value() && Clock::now() >= *by_) {
    return kvlane::Status::Timeout("control: the exchange ran past its bound");
  }
  if (rc == 0) {
    return kvlane::Status::Timeout("control: peer silent for " + std::to_string(timeout_.count()) +
                                   " ms");
  }
  return kvlane::Status::Ok();
}

// WaitReady(POLLIN) that asks `stop` every kStopPoll of the wait.
kvlane::Status ControlChannel::WaitReadable(const std::function<bool()>& stop) {
  if (!stop) return WaitReady(POLLIN);
  if (aborted_) return kvlane::Status::Canceled("control: connection aborted by this rank");
  const auto deadline = Clock::now() + timeout_;
  while (true) {
    pollfd pfd{fd_, POLLIN, 0};
    const int rc = poll(&pfd, 1, MsUntil(std::min(deadline, Clock::now() + kStopPoll)));
    if (rc < 0 && errno != EINTR) return Errno("poll");
    if (rc > 0) return kvlane::Status::Ok();
    if (stop()) return kvlane::Status::Canceled("control: wait given up (stop)");
    if (Clock::now() >= deadline) {
      return kvlane::Status::Timeout("control: peer silent for " +
                                     std::to_string(timeout_.count()) + " ms");
    }
  }
}

bool ControlChannel::Pending() const {
  if (aborted_) return false;
  pollfd pfd{fd_, POLLIN, 0};
  return poll(&pfd, 1, 0) > 0;
}

kvlane::Status ControlChannel::SendRaw(const void* data, uint64_t len) {
  const char* p = static_cast<const char*>(data);
  while (len > 0) {
    KVLANE_RETURN_IF_ERROR(WaitReady(POLLOUT));
    // Not blocking: a blocking send of more than the socket has room for would
    // wait for the whole of it past the timeout (a peer that stopped reading).
    ssize_t n = send(fd_, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
    if (n < 0)
      return kvlane::Status::RemoteDisconnect("control: send: " + std::string(strerror(errno)));
    p += n;
    len -= static_cast<uint64_t>(n);
  }
  return kvlane::Status::Ok();
}

kvlane::Status ControlChannel::ReceiveRaw(void* data, uint64_t len) {
  char* p = static_cast<char*>(data);
  while (len > 0) {
    KVLANE_RETURN_IF_ERROR(WaitReady(POLLIN));
    ssize_t n = recv(fd_, p, len, MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
    if (n <= 0) return kvlane::Status::RemoteDisconnect("control: peer closed the connection");
    p += n;
    len -= static_cast<uint64_t>(n);
  }
  return kvlane::Status::Ok();
}

void ControlChannel::Seal(std::string send_key, std::string receive_key) {
  send_key_ = std::move(send_key);
  receive_key_ = std::move(receive_key);
  sent_ = received_ = 0;
}

kvlane::Status ControlChannel::Send(const nlohmann::json& message) {
  std::string body = message.dump();
  uint32_t len = htonl(static_cast<uint32_t>(body.size()));
  if (sealed()) {  // the MAC follows the body
    const std::string mac = MessageMac(send_key_, sent_++, body);
    if (mac.size() != kMacBytes) {
      Abort();
      return kvlane::Status::Backend("control: HMAC-SHA256 failed");
    }
    body += mac;
  }
  kvlane::Status s = SendRaw(&len, sizeof(len));
  if (s.ok()) s = SendRaw(body.data(), body.size());
  // Part of the message may have gone out: the peer would read the next one out
  // of step (sealed: as out of order; unsealed: as a malformed or oversized one).
  if (!s.ok()) Abort();
  return s;
}

kvlane::Result<nlohmann::json> ControlChannel::Receive(const std::function<bool()>& stop) {
  KVLANE_RETURN_IF_ERROR(WaitReadable(stop));
  kvlane::Result<std::string> body = ReceiveFrame();
  if (!body.ok()) {
    Abort();  // part of a message came, or one not to be taken: the framing is lost
    return body.status();
  }
  return ParseMessage(*body);
}

kvlane::Result<std::string> ControlChannel::ReceiveFrame() {
  uint32_t len = 0;
  KVLANE_RETURN_IF_ERROR(ReceiveRaw(&len, sizeof(len)));
  len = ntohl(len);
  if (len > max_message_) return kvlane::Status::InvalidArgument("control: oversized message");
  const size_t total = len + (sealed() ? kMacBytes : 0);
  // Grown as the bytes come: a length alone costs no more than what follows it.
  std::string body;
  while (body.size() < total) {
    const size_t at = body.size(), step = std::min<size_t>(total - at, size_t{1} << 20);
    body.resize(at + step);
    KVLANE_RETURN_IF_ERROR(ReceiveRaw(body.data() + at, step));
  }
  if (sealed()) {
    const std::string_view text(body.data(), len), mac(body.data() + len, kMacBytes);
    if (!MessageMacMatches(receive_key_, received_++, text, mac)) {
      return kvlane::Status::InvalidArgument(
          "control: a message failed its MAC (altered, injected, replayed or reordered on the "
          "way): the connection is not the peer's alone");
    }
    body.resize(len);
  }
  return body;
}

kvlane::Result<nlohmann::json> ControlChannel::ParseMessage(const std::string& body) {
  if (JsonDepth(body) > kvlane_tools::kMaxJsonDepth) {
    return kvlane::Status::InvalidArgument("control: a message nested too deeply");
  }
  nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return kvlane::Status::InvalidArgument("control: malformed message");
  }
  auto type = j.find("type");
  if (type == j.end() || !type->is_string()) {  // every message names its type
    return kvlane::Status::InvalidArgument("control: a message without a \"type\" string");
  }
  return j;
}

kvlane::Result<nlohmann::json> ControlChannel::Expect(const std::string& type) {
  return ExpectOneOf({type});
}

kvlane::Result<nlohmann::json> ControlChannel::ExpectOneOf(const std::vector<std::string>& types,
                                                           const std::function<bool()>& stop) {
  KVLANE_ASSIGN_OR_RETURN(nlohmann::json j, Receive(stop));
  std::string got = j.value("type", "");
  if (got == "error") {
    return kvlane::Status::Backend("peer reported: " + PeerText(j, "message", 512, "?"));
  }
  if (std::find(types.begin(), types.end(), got) == types.end()) {
    std::string wanted;
    for (const std::string& t : types) wanted += (wanted.empty() ? "'" : " or '") + t + "'";
    return kvlane::Status::InvalidArgument("control: expected " + wanted + ", got '" +
                                           Printable(got, 64) + "'");
  }
  return j;
}

}  // namespace kvbench
