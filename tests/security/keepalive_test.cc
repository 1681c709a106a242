// TCP keepalive (AgentOptions::tcp_keepalive) on every tcp socket of an agent:
// the configured values on both sides of a peer connection, none at 0; and a peer that stops
// answering (a socket filter drops everything it sends, as if its host had vanished: no FIN, no
// RST) ends the connection on the side that probes within the keepalive's
// time: the target's connection gives its descriptor back, the initiator's
// channel latches kRemoteDisconnect and the next post fails at once.
#include "transport/stream/keepalive.h"

#include <gtest/gtest.h>
#include <linux/filter.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/metadata.h"
#include "test_util.h"
#include "transport/stream/socket.h"

namespace kvlane::test {
namespace {

using namespace std::chrono_literals;

// A connected TCP socket of this process. `inode` names the socket for as long as
// a descriptor holds it (once the kernel ends a connection, getpeername fails:
// the ports no longer find it).
struct TcpSock {
  int fd;
  uint16_t local_port, peer_port;
  ino_t inode;
};

// The socket inode of descriptor `fd`, read through /proc (a path, not the
// descriptor: the engine may close `fd` meanwhile, and a descriptor call racing
// that close is a data race to TSan).
std::optional<ino_t> InodeOf(int fd) {
  char link[64];
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  const ssize_t n = readlink(path.c_str(), link, sizeof(link) - 1);
  if (n <= 0) return std::nullopt;
  link[n] = '\0';
  unsigned long long inode = 0;
  if (std::sscanf(link, "socket:[%llu]", &inode) != 1) return std::nullopt;
  return static_cast<ino_t>(inode);
}

std::optional<uint16_t> PortOf(int fd, bool peer) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  auto* sa = reinterpret_cast<sockaddr*>(&ss);
  if ((peer ? getpeername(fd, sa, &len) : getsockname(fd, sa, &len)) != 0) return std::nullopt;
  if (ss.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  if (ss.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  return std::nullopt;
}

// Every connected TCP socket in /proc/self/fd (listeners and unix sockets left out).
std::vector<TcpSock> TcpSockets() {
  std::vector<TcpSock> out;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    const int fd = std::stoi(e.path().filename().string());
    int proto = 0;
    socklen_t len = sizeof(proto);
    if (getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &proto, &len) != 0 || proto != IPPROTO_TCP)
      continue;
    auto local = PortOf(fd, false), peer = PortOf(fd, true);
    auto inode = InodeOf(fd);
    if (local && peer && inode) out.push_back({fd, *local, *peer, *inode});
  }
  return out;
}

// The sockets with `port` at the local end (a server's), or at the far end (its clients').
std::vector<TcpSock> ServedOn(uint16_t port) {
  std::vector<TcpSock> out;
  for (const TcpSock& s : TcpSockets())
    if (s.local_port == port) out.push_back(s);
  return out;
}
std::vector<TcpSock> DialedTo(uint16_t port) {
  std::vector<TcpSock> out;
  for (const TcpSock& s : TcpSockets())
    if (s.peer_port == port) out.push_back(s);
  return out;
}

// What the kernel holds for a socket's keepalive.
struct KeepaliveSeen {
  int on = -1, idle = -1, interval = -1, probes = -1;
  unsigned user_timeout_ms = ~0u;
  bool operator==(const KeepaliveSeen&) const = default;
};

KeepaliveSeen Seen(int fd) {
  KeepaliveSeen k;
  socklen_t len = sizeof(int);
  getsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &k.on, &len);
  getsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &k.idle, &len);
  getsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &k.interval, &len);
  getsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &k.probes, &len);
  getsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &k.user_timeout_ms, &len);
  return k;
}

std::string ToString(const KeepaliveSeen& k) {
  return "on " + std::to_string(k.on) + " idle " + std::to_string(k.idle) + " s, interval " +
         std::to_string(k.interval) + " s, probes " + std::to_string(k.probes) + ", user timeout " +
         std::to_string(k.user_timeout_ms) + " ms";
}

// The socket ignores everything that arrives (a classic BPF filter returning 0):
// to it, the peer has vanished.
void DeafenForever(int fd) {
  sock_filter drop[] = {BPF_STMT(BPF_RET | BPF_K, 0)};
  sock_fprog prog{1, drop};
  ASSERT_EQ(setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof(prog)), 0)
      << std::strerror(errno);
}

// The socket drops every segment that carries no payload (pure ACKs, answers
// to keepalive probes): data still arrives, but what the socket sends is never
// acknowledged. (Socket filters see a TCP segment from its TCP header on.)
void DropPureAcks(int fd) {
  sock_filter code[] = {
      BPF_STMT(BPF_LD | BPF_B | BPF_ABS, 12),        // data offset, in the high nibble,
      BPF_STMT(BPF_ALU | BPF_RSH | BPF_K, 2),        // in 32-bit words:
      BPF_STMT(BPF_ALU | BPF_AND | BPF_K, 0x3c),     // the header's bytes
      BPF_STMT(BPF_MISC | BPF_TAX, 0),               // X = header bytes
      BPF_STMT(BPF_LD | BPF_W | BPF_LEN, 0),         // A = segment bytes
      BPF_JUMP(BPF_JMP | BPF_JGT | BPF_X, 0, 0, 1),  // a payload: keep the segment
      BPF_STMT(BPF_RET | BPF_K, 0xffffffff),
      BPF_STMT(BPF_RET | BPF_K, 0),
  };
  sock_fprog prog{static_cast<unsigned short>(std::size(code)), code};
  ASSERT_EQ(setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof(prog)), 0)
      << std::strerror(errno);
}

uint32_t Unacked(int fd) {
  tcp_info ti{};
  socklen_t len = sizeof(ti);
  return getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) == 0 ? ti.tcpi_unacked : 0;
}

// Until every socket of `socks` has its data acknowledged (the peer's delayed
// ACK came): the kernel sends keepalive probes only then.
void AwaitAcked(const std::vector<TcpSock>& socks) {
  for (const TcpSock& s : socks) {
    for (auto until = std::chrono::steady_clock::now() + 5s;
         Unacked(s.fd) != 0 && std::chrono::steady_clock::now() < until;)
      std::this_thread::sleep_for(5ms);
    ASSERT_EQ(Unacked(s.fd), 0u) << "socket " << s.local_port << " -> " << s.peer_port;
  }
}

std::unique_ptr<Agent> MakeAgent(const std::string& name, std::chrono::seconds keepalive,
                                 std::chrono::milliseconds io_timeout) {
  AgentOptions o = OptionsFor(name, "tcp");
  o.tcp_keepalive = keepalive;
  o.io_timeout = io_timeout;
  auto a = Agent::Create(o);
  EXPECT_TRUE(a.ok()) << a.status().ToString();
  return a.ok() ? std::move(a).value() : nullptr;
}

uint16_t TcpPortOf(Agent& agent) {
  auto meta = core::DecodeMeta(agent.ExportMetadata().value());
  return meta.ok() ? meta->tcp_port : 0;
}

// a (the initiator) connected to b (the target) over tcp, and the sockets of
// that connection on each side: lanes_per_peer lanes and one control connection.
struct Connected {
  Buffers bufs;  // first: outlives the agents
  std::unique_ptr<Agent> a, b;
  std::vector<TcpSock> initiator, target;
};

// io_timeout 1 s by default: the user timeout's floor (2 x io_timeout + 1 s) stays
// under a 1 s keepalive's 4 s.
void ConnectOver(Connected* c, std::chrono::seconds a_keepalive, std::chrono::seconds b_keepalive,
                 std::chrono::milliseconds a_io = 1000ms, std::chrono::milliseconds b_io = 1000ms) {
  c->a = MakeAgent("a", a_keepalive, a_io);
  c->b = MakeAgent("b", b_keepalive, b_io);
  ASSERT_TRUE(c->a && c->b);
  Connect(*c->a, *c->b);
  auto t = c->a->PeerTransport("b");  // connects
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t.value(), "tcp");
  const uint16_t port = TcpPortOf(*c->b);
  ASSERT_NE(port, 0);
  c->initiator = DialedTo(port);
  // The target's connection exists once the handshake the initiator waited for is done.
  c->target = ServedOn(port);
  const size_t n = static_cast<size_t>(c->a->options().lanes_per_peer) + 1;
  ASSERT_EQ(c->initiator.size(), n);
  ASSERT_EQ(c->target.size(), n);
}

// Registers a fresh buffer on each side and WRITEs it from a to b.
Status WriteOnce(Connected& c) {
  auto& src = c.bufs.Make(4096, 7);
  if (auto r = c.a->RegisterMemory(src.data(), src.size()); !r.ok()) return r.status();
  auto& dst = c.bufs.Make(4096);
  if (auto r = c.b->RegisterMemory(dst.data(), dst.size()); !r.ok()) return r.status();
  Connect(*c.a, *c.b);
  KVLANE_ASSIGN_OR_RETURN(XferHandle h,
                          MakeSimple(*c.a, "b", Op::kWrite, src.data(), dst.data(), 4096));
  Status s = PostAndWait(*c.a, &h);
  (void)c.a->Release(&h);
  return s;
}

// Whether a descriptor of this process still holds any socket of `conns`, ended
// by the kernel or not (found by inode: an ended connection has no peer name).
bool AnyOpen(const std::vector<TcpSock>& conns) {
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    const auto inode = InodeOf(std::stoi(e.path().filename().string()));
    for (const TcpSock& c : conns)
      if (inode == c.inode) return true;
  }
  return false;
}

void ExpectAll(const std::vector<TcpSock>& socks, const KeepaliveSeen& want, const char* side) {
  for (const TcpSock& s : socks)
    EXPECT_EQ(Seen(s.fd), want) << side << " socket " << s.local_port << " -> " << s.peer_port
                                << ": " << ToString(Seen(s.fd));
}

TEST(KeepaliveTest, DefaultIsThirtySecondsOnBothSides) {
  Connected c;
  const AgentOptions d;
  ASSERT_NO_FATAL_FAILURE(
      ConnectOver(&c, d.tcp_keepalive, d.tcp_keepalive, d.io_timeout, d.io_timeout));
  // 30 s idle, 3 probes 10 s apart; given up after 60 s.
  const KeepaliveSeen want{1, 30, 10, 3, 60000};
  ExpectAll(c.initiator, want, "initiator");
  ExpectAll(c.target, want, "target");
}

TEST(KeepaliveTest, ConfiguredValuesOnBothSides) {
  Connected c;
  ASSERT_NO_FATAL_FAILURE(ConnectOver(&c, 7s, 2s, 2000ms, 10000ms));
  // The user timeout: the last probe's deadline (7 + 3 x 2 s) ...
  ExpectAll(c.initiator, {1, 7, 2, 3, 13000}, "initiator");
  // ... but at least 2 x io_timeout + 1 s, so that a live peer that stops reading
  // fails by io_timeout first (kTimeout). Probes at least 1 s apart.
  ExpectAll(c.target, {1, 2, 1, 3, 21000}, "target");
}

TEST(KeepaliveTest, ZeroLeavesItOff) {
  Connected c;
  ASSERT_NO_FATAL_FAILURE(ConnectOver(&c, 0s, 0s));
  for (const auto* side : {&c.initiator, &c.target}) {
    for (const TcpSock& s : *side) {
      const KeepaliveSeen k = Seen(s.fd);
      EXPECT_EQ(k.on, 0) << ToString(k);
      EXPECT_EQ(k.user_timeout_ms, 0u) << ToString(k);
    }
  }
  EXPECT_TRUE(WriteOnce(c).ok());
}

TEST(KeepaliveTest, OutOfRangeIsRefusedAtCreate) {
  for (std::chrono::seconds bad : {-1s, 32768s}) {
    AgentOptions o = OptionsFor("bad", "tcp");
    o.tcp_keepalive = bad;
    auto a = Agent::Create(o);
    ASSERT_FALSE(a.ok()) << bad.count();
    EXPECT_EQ(a.status().code(), Code::kInvalidArgument);
    EXPECT_NE(a.status().message().find("tcp_keepalive"), std::string::npos)
        << a.status().ToString();
  }
  for (std::chrono::seconds good : {0s, 1s, 32767s}) {
    AgentOptions o = OptionsFor("good", "tcp");
    o.tcp_keepalive = good;
    EXPECT_TRUE(Agent::Create(o).ok()) << good.count();
  }
}

// An option the socket does not support (a unix socket has no TCP level:
// EOPNOTSUPP; an old kernel without TCP_USER_TIMEOUT: ENOPROTOOPT) is skipped,
// so the connection goes on with what the kernel has; any other error fails.
TEST(KeepaliveTest, OptionsTheSocketLacksAreSkipped) {
  AgentOptions o;
  o.tcp_keepalive = 5s;
  const core::Keepalive k = core::KeepaliveFor(o);
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  core::Fd a(sv[0]), b(sv[1]);
  Status s = core::SetKeepalive(a.get(), k);
  EXPECT_TRUE(s.ok()) << s.ToString();
  int on = 0;
  socklen_t len = sizeof(on);
  ASSERT_EQ(getsockopt(a.get(), SOL_SOCKET, SO_KEEPALIVE, &on, &len), 0);
  EXPECT_EQ(on, 1) << "a supported option is still set";
  s = core::SetKeepalive(-1, k);  // EBADF: not a missing option
  EXPECT_EQ(s.code(), Code::kBackend) << s.ToString();
}

// Polls until none of `conns` is open; returns how long that took (or `limit`).
std::chrono::milliseconds UntilClosed(const std::vector<TcpSock>& conns,
                                      std::chrono::seconds limit) {
  const auto t0 = std::chrono::steady_clock::now();
  while (AnyOpen(conns) && std::chrono::steady_clock::now() - t0 < limit)
    std::this_thread::sleep_for(50ms);
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               t0);
}

// The error latched on a's channel to "b", once there is one (or kOk after `limit`).
Status AwaitPeerError(Agent& a, std::chrono::seconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  Status s = a.PeerError("b");
  while (s.ok() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(20ms);
    s = a.PeerError("b");
  }
  return s;
}

// The initiator goes on with the peer's channel failed: the next post fails at once.
void ExpectChannelFailed(Connected& c) {
  const Status latched = AwaitPeerError(*c.a, 5s);
  EXPECT_EQ(latched.code(), Code::kRemoteDisconnect) << latched.ToString();
  const auto t0 = std::chrono::steady_clock::now();
  Status s = WriteOnce(c);
  EXPECT_TRUE(s.code() == Code::kRemoteDisconnect || s.code() == Code::kTimeout) << s.ToString();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s) << "the post waited instead of failing";
}

// Only the target probes (1 s idle: dropped after 4 s of silence). The target's
// connections end and give their descriptors back; its reset reaches the
// initiator, whose channel fails.
TEST(KeepaliveTest, TargetDropsTheConnectionsOfAVanishedInitiator) {
  Connected c;
  ASSERT_NO_FATAL_FAILURE(ConnectOver(&c, 0s, 1s));
  ASSERT_TRUE(WriteOnce(c).ok());
  ASSERT_NO_FATAL_FAILURE(AwaitAcked(c.target));
  for (const TcpSock& s : c.target) ASSERT_NO_FATAL_FAILURE(DeafenForever(s.fd));
  const auto took = UntilClosed(c.target, 20s);
  EXPECT_FALSE(AnyOpen(c.target)) << "the target still holds the connections after " << took.count()
                                  << " ms";
  EXPECT_GE(took, 3s) << "closed before keepalive could have given up";
  std::printf("[ info ] target closed its connections %lld ms after the initiator went silent\n",
              static_cast<long long>(took.count()));
  ExpectChannelFailed(c);
  // The target serves a fresh connection.
  ASSERT_TRUE(c.a->RemovePeer("b").ok());
  EXPECT_TRUE(WriteOnce(c).ok());
}

// The target's reply to a WRITE is never acknowledged (the initiator's ACKs are
// dropped): the kernel sends no keepalive probe while data awaits its ACK, so
// TCP_USER_TIMEOUT ends that connection, as soon as keepalive would have
// (without it, retransmissions would go on for ~15 minutes).
TEST(KeepaliveTest, TargetDropsAConnectionWhoseReplyIsNeverAcknowledged) {
  Connected c;
  ASSERT_NO_FATAL_FAILURE(ConnectOver(&c, 0s, 1s));
  ASSERT_NO_FATAL_FAILURE(AwaitAcked(c.target));
  for (const TcpSock& s : c.target) ASSERT_NO_FATAL_FAILURE(DropPureAcks(s.fd));
  ASSERT_TRUE(WriteOnce(c).ok());  // the frame arrives, the reply too; its ACK does not
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<TcpSock> waiting;
  for (const TcpSock& s : c.target)
    if (Unacked(s.fd) != 0) waiting.push_back(s);
  ASSERT_EQ(waiting.size(), 1u) << "the lane that carried the WRITE";
  UntilClosed(waiting, 20s);
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_FALSE(AnyOpen(waiting)) << "the target still holds the connection";
  EXPECT_GE(took, 3s) << "closed before the user timeout";
  ExpectChannelFailed(c);  // the idle connections' resets reached the initiator
}

// Only the initiator probes: its idle lanes fail with kRemoteDisconnect (not a
// backend error) once the target stops answering, and the next post fails at
// once; its reset ends the target's connections.
TEST(KeepaliveTest, InitiatorFailsItsIdleLanesToAVanishedTarget) {
  Connected c;
  ASSERT_NO_FATAL_FAILURE(ConnectOver(&c, 1s, 0s));
  ASSERT_TRUE(WriteOnce(c).ok());
  ASSERT_NO_FATAL_FAILURE(AwaitAcked(c.initiator));
  for (const TcpSock& s : c.initiator) ASSERT_NO_FATAL_FAILURE(DeafenForever(s.fd));
  const auto t0 = std::chrono::steady_clock::now();
  const Status latched = AwaitPeerError(*c.a, 20s);
  EXPECT_EQ(latched.code(), Code::kRemoteDisconnect) << latched.ToString();
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 3s) << latched.ToString();
  ExpectChannelFailed(c);
  EXPECT_LT(UntilClosed(c.target, 10s), 10s) << "the target kept the connections";
}

}  // namespace
}  // namespace kvlane::test
