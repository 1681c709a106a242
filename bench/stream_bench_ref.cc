// The references of kvlane_stream_bench (plain blocking sockets, one thread per
// side, and single-thread memcpy) and the forked target process.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "kvlane/kvlane.h"
#include "stream_bench.h"

namespace kvlane::bench {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

void SendAllOrDie(int fd, const void* p, size_t n) {
  auto* c = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t k = send(fd, c, n, MSG_NOSIGNAL);
    if (k <= 0) _exit(90);
    c += k, n -= k;
  }
}

void RecvAllOrDie(int fd, void* p, size_t n) {
  auto* c = static_cast<char*>(p);
  while (n > 0) {
    ssize_t k = recv(fd, c, n, MSG_WAITALL);
    if (k <= 0) _exit(91);
    c += k, n -= k;
  }
}

int Dial(uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) _exit(92);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));  // as kvlane's lanes
  return fd;
}

// Dials the target's reference listener and sends `r`; returns once the target
// has its buffer ready (allocated and zeroed: touched), so that no client clock
// counts that.
int Open(uint16_t port, const RefRequest& r) {
  int fd = Dial(port);
  SendAllOrDie(fd, &r, sizeof(r));
  char ready;
  RecvAllOrDie(fd, &ready, 1);
  return fd;
}

// One blocking `msg`-byte request and its reply on `fd`: microseconds.
double EchoOnce(int fd, uint8_t* buf, uint32_t msg) {
  uint8_t reply[kEchoReplyBytes];
  auto t0 = Clock::now();
  SendAllOrDie(fd, buf, msg);
  RecvAllOrDie(fd, reply, sizeof(reply));
  return Since(t0) * 1e6;
}

// Serves one reference connection: the mirror image of the client functions.
void Serve(int fd) {
  RefRequest r{};
  RecvAllOrDie(fd, &r, sizeof(r));
  if (r.msg_bytes == 0 || r.footprint < r.msg_bytes) _exit(93);
  std::vector<uint8_t> buf(r.footprint);
  const char ready = 1;
  SendAllOrDie(fd, &ready, 1);  // Open waits for it
  uint64_t slots = r.footprint / r.msg_bytes;
  if (r.op == RefOp::kSinkOpen) {
    for (uint64_t i = 0;; ++i) {
      ssize_t k = recv(fd, buf.data() + (i % slots) * r.msg_bytes, r.msg_bytes, MSG_WAITALL);
      if (k <= 0) break;  // the client closed: the stream is over
    }
    close(fd);
    return;
  }
  uint8_t reply[kEchoReplyBytes] = {};
  for (uint64_t i = 0, done = 0; done < r.total_bytes; ++i, done += r.msg_bytes) {
    uint8_t* p = buf.data() + (i % slots) * r.msg_bytes;
    if (r.op == RefOp::kSource) {
      SendAllOrDie(fd, p, r.msg_bytes);
    } else {
      RecvAllOrDie(fd, p, r.msg_bytes);
      if (r.op == RefOp::kEcho) SendAllOrDie(fd, reply, sizeof(reply));
    }
  }
  if (r.op == RefOp::kSink) SendAllOrDie(fd, reply, 1);  // all bytes landed
  close(fd);
}

int Listen(uint16_t* port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  listen(fd, 16);
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  *port = ntohs(a.sin_port);
  return fd;
}

}  // namespace

int RunTarget(int in_fd, int out_fd, uint64_t bytes, int spin_us) {
  AgentOptions o;
  o.name = "target";
  if (spin_us >= 0) o.spin = std::chrono::microseconds(spin_us);
  o.transports = {"shm", "tcp"};
  auto agent = Agent::Create(o);
  if (!agent.ok()) return 10;
  std::vector<uint8_t> mem(bytes, 0);
  if (!agent.value()->RegisterMemory(mem.data(), bytes).ok()) return 11;
  uint16_t port = 0;
  int lfd = Listen(&port);
  std::thread server([&] {
    // A thread per connection: the "beside" rows hold two at once.
    for (int c; (c = accept(lfd, nullptr, nullptr)) >= 0;) std::thread(Serve, c).detach();
  });
  server.detach();  // ends with the process
  std::string blob = agent.value()->ExportMetadata().value();
  uint32_t n = static_cast<uint32_t>(blob.size());
  uint64_t addr = reinterpret_cast<uint64_t>(mem.data());
  if (write(out_fd, &n, 4) != 4 || write(out_fd, blob.data(), n) != n || write(out_fd, &port, 2) != 2 ||
      write(out_fd, &addr, 8) != 8)
    return 12;
  char c;
  while (read(in_fd, &c, 1) > 0) {
  }
  _exit(0);  // skip destructors of the detached server's state
}

double RefSink(uint16_t port, uint64_t total, uint32_t msg, uint8_t* buf, uint64_t footprint) {
  int fd = Open(port, {RefOp::kSink, msg, total, footprint});
  uint64_t slots = footprint / msg;
  auto t0 = Clock::now();
  for (uint64_t i = 0, done = 0; done < total; ++i, done += msg) SendAllOrDie(fd, buf + (i % slots) * msg, msg);
  char ack;
  RecvAllOrDie(fd, &ack, 1);
  double s = Since(t0);
  close(fd);
  return s;
}

double RefSource(uint16_t port, uint64_t total, uint32_t msg, uint8_t* buf, uint64_t footprint) {
  int fd = Open(port, {RefOp::kSource, msg, total, footprint});
  uint64_t slots = footprint / msg;
  auto t0 = Clock::now();
  for (uint64_t i = 0, done = 0; done < total; ++i, done += msg) RecvAllOrDie(fd, buf + (i % slots) * msg, msg);
  double s = Since(t0);
  close(fd);
  return s;
}

// `window` requests in flight: send `window`, then one new request per reply.
double RefEcho(uint16_t port, uint64_t count, uint32_t msg, int window, uint8_t* buf, uint64_t footprint) {
  int fd = Open(port, {RefOp::kEcho, msg, count * msg, footprint});
  uint64_t slots = footprint / msg;
  uint8_t reply[kEchoReplyBytes];
  auto t0 = Clock::now();
  uint64_t sent = 0;
  for (; sent < count && sent < static_cast<uint64_t>(window); ++sent) SendAllOrDie(fd, buf + (sent % slots) * msg, msg);
  for (uint64_t got = 0; got < count; ++got) {
    RecvAllOrDie(fd, reply, sizeof(reply));
    if (sent < count) SendAllOrDie(fd, buf + (sent % slots) * msg, msg), ++sent;
  }
  double s = Since(t0);
  close(fd);
  return s;
}

std::vector<double> RefEchoLatency(uint16_t port, uint64_t count, uint32_t msg, int gap_us,
                                   uint8_t* buf) {
  int fd = Open(port, {RefOp::kEcho, msg, count * msg, msg});
  std::vector<double> us;
  for (uint64_t i = 0; i < count; ++i) {
    std::this_thread::sleep_for(std::chrono::microseconds(gap_us));
    us.push_back(EchoOnce(fd, buf, msg));
  }
  close(fd);
  return us;
}

double RefSinkUntil(uint16_t port, uint32_t msg, uint8_t* buf, uint64_t footprint,
                    const std::atomic<bool>& stop) {
  int fd = Open(port, {RefOp::kSinkOpen, msg, 0, footprint});
  uint64_t slots = footprint / msg, sent = 0;
  auto t0 = Clock::now();
  for (uint64_t i = 0; !stop.load(std::memory_order_relaxed); ++i, sent += msg)
    SendAllOrDie(fd, buf + (i % slots) * msg, msg);
  double s = Since(t0);
  close(fd);
  return static_cast<double>(sent) / s;
}

std::vector<double> RefEchoAfterBulk(uint16_t port, uint64_t count, uint32_t msg, int gap_us,
                                     uint8_t* buf, uint32_t bulk) {
  int echo_fd = Open(port, {RefOp::kEcho, msg, count * msg, msg});
  // The bulk is an echo too: its reply says the target has all of it, as a
  // kvlane WRITE's completion does (a send's return says only that the bytes
  // are in this side's socket buffer, and the target may still be reading them
  // when the next round starts).
  int bulk_fd = Open(port, {RefOp::kEcho, bulk, count * bulk, bulk});
  int go[2], done[2];  // the bulk thread sleeps in read() as a lane thread sleeps
  if (pipe(go) != 0 || pipe(done) != 0) _exit(94);
  std::vector<uint8_t> payload(bulk, 3);
  std::thread sender([&] {
    uint8_t landed[kEchoReplyBytes];
    for (char c; read(go[0], &c, 1) == 1;) {
      SendAllOrDie(bulk_fd, payload.data(), bulk);
      RecvAllOrDie(bulk_fd, landed, sizeof(landed));
      if (write(done[1], &c, 1) != 1) _exit(95);
    }
  });
  std::vector<double> us;
  for (uint64_t i = 0; i < count; ++i) {
    std::this_thread::sleep_for(std::chrono::microseconds(gap_us));
    char c = 1;
    if (write(go[1], &c, 1) != 1) _exit(95);
    us.push_back(EchoOnce(echo_fd, buf, msg));
    if (read(done[0], &c, 1) != 1) _exit(95);
  }
  close(go[1]);
  sender.join();
  for (int fd : {go[0], done[0], done[1], echo_fd, bulk_fd}) close(fd);
  return us;
}

double RefMemcpy(uint8_t* dst, const uint8_t* src, uint64_t total, uint32_t msg, uint64_t footprint) {
  uint64_t slots = footprint / msg;
  auto t0 = Clock::now();
  for (uint64_t i = 0, done = 0; done < total; ++i, done += msg) {
    uint64_t off = (i % slots) * msg;
    std::memcpy(dst + off, src + off, msg);
  }
  asm volatile("" ::: "memory");
  return Since(t0);
}

}  // namespace kvlane::bench
