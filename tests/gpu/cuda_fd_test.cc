// Runs everywhere (no GPU needed): handing VMM allocations' file descriptors to
// authenticated peers over the cuda control socket (SCM_RIGHTS), with a fake
// fd source standing in for the driver; and hostile control peers, each test
// bounded in time (a hang fails it instead of stalling it).
#include <gtest/gtest.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <future>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "core/random.h"
#include "transport/cuda/cuda_control.h"
#include "transport/cuda/fanout_send.h"
#include "transport/stream/fd_passing.h"
#include "transport/stream/hello_mac.h"

namespace kvlane::core {
namespace {

constexpr uint64_t kKey = 0x1234;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

Deadline Soon() { return DeadlineIn(milliseconds(2000)); }

// A memfd holding `text`: what an exporter's fd would name.
Fd MemFdWith(const std::string& text) {
  Fd fd(memfd_create("kvlane-fd-test", MFD_CLOEXEC));
  EXPECT_TRUE(fd.valid());
  EXPECT_EQ(write(fd.get(), text.data(), text.size()), static_cast<ssize_t>(text.size()));
  return fd;
}

std::string ReadAll(int fd) {
  char buf[64] = {};
  ssize_t n = pread(fd, buf, sizeof(buf), 0);
  return n > 0 ? std::string(buf, n) : std::string();
}

// Runs `f` on a thread of its own; true when it returned within `limit`. When
// it did not, `unblock` runs before the join, so that a hang fails the test
// instead of stalling it.
bool ReturnsWithin(milliseconds limit, const std::function<void()>& f,
                   const std::function<void()>& unblock) {
  std::promise<void> done;
  std::future<void> returned = done.get_future();
  std::thread t([&] {
    f();
    done.set_value();
  });
  const bool in_time = returned.wait_for(limit) == std::future_status::ready;
  if (!in_time) unblock();
  t.join();
  return in_time;
}

// True when the peer of `sock` hangs up within `limit` (what it sent first is dropped).
bool HungUpWithin(int sock, milliseconds limit) {
  const auto end = Clock::now() + limit;
  char buf[4096];
  for (;;) {
    const auto left = std::chrono::duration_cast<milliseconds>(end - Clock::now());
    if (left.count() <= 0 || !WaitReadable(sock, left).ok()) return false;
    ssize_t n = recv(sock, buf, sizeof(buf), MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return true;
  }
}

// Up to `n` bytes from `sock`, read until they came, the peer closed, or `limit` passed.
std::string ReadFor(int sock, size_t n, milliseconds limit) {
  const auto end = Clock::now() + limit;
  std::string got;
  char buf[4096];
  while (got.size() < n) {
    const auto left = std::chrono::duration_cast<milliseconds>(end - Clock::now());
    if (left.count() <= 0 || !WaitReadable(sock, left).ok()) break;
    ssize_t r = recv(sock, buf, std::min(sizeof(buf), n - got.size()), MSG_DONTWAIT);
    if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) break;
    if (r > 0) got.append(buf, static_cast<size_t>(r));
  }
  return got;
}

// Sends `bytes` one at a time, `gap` apart, until sent or the peer hung up.
// Returns how long it took the peer to hang up; nullopt if it never did.
std::optional<milliseconds> TrickleUntilCut(int sock, const std::string& bytes, milliseconds gap) {
  const auto t0 = Clock::now();
  for (char b : bytes) {
    if (send(sock, &b, 1, MSG_NOSIGNAL) != 1) break;
    if (HungUpWithin(sock, gap)) break;
  }
  if (!HungUpWithin(sock, gap)) return std::nullopt;
  return std::chrono::duration_cast<milliseconds>(Clock::now() - t0);
}

ChallengeFrame NewChallenge() {
  ChallengeFrame c{kChallengeMagic, kWireVersion, 0, {}};
  RandomBytes(c.nonce.data(), c.nonce.size());
  return c;
}

// The challenge a control server opens with, or nullopt.
std::optional<ChallengeFrame> ReadChallenge(int sock) {
  ChallengeFrame c{};
  if (!RecvWithFd(sock, &c, sizeof(c), nullptr, DeadlineIn(milliseconds(2000))).ok())
    return std::nullopt;
  EXPECT_EQ(c.magic, kChallengeMagic);
  return c;
}

// A control Hello (+ name) that answers `c` with a proof made with `secret`.
std::string HelloFor(const ChallengeFrame& c, uint64_t target_id, const Secret& secret,
                     const std::string& name = "evil") {
  StreamHello h{};
  h.magic = kHelloMagic;
  h.version = kWireVersion;
  h.role = static_cast<uint8_t>(ConnRole::kCudaControl);
  h.name_len = static_cast<uint8_t>(name.size());
  h.target_id = target_id;
  RandomBytes(h.nonce.data(), h.nonce.size());
  h.proof = HelloProof(secret, c.nonce, h.nonce, target_id, h.version, name);
  return std::string(reinterpret_cast<const char*>(&h), sizeof(h)) + name;
}

// Opens a raw connection to the control server at `socket`, reads its
// challenge and sends `hello` as is. Returns the reply (nullopt: none came).
std::optional<StreamHelloReply> SendRawHello(const std::string& socket, const std::string& hello,
                                             Fd* sock) {
  auto c = ConnectUnix(socket, milliseconds(2000));
  if (!c.ok()) return std::nullopt;
  *sock = std::move(c).value();
  if (!ReadChallenge(sock->get())) return std::nullopt;
  StreamHelloReply r{};
  if (!SendWithFd(sock->get(), hello.data(), hello.size(), -1, Soon()).ok() ||
      !RecvWithFd(sock->get(), &r, sizeof(r), nullptr, Soon()).ok())
    return std::nullopt;
  return r;
}

// A fake control peer at `name` (e.g. a process squatting an agent's socket
// name): `serve` runs on the first connection it accepts, on a thread of its
// own; the connection is then held open until Release() or destruction.
class FakeControlPeer {
 public:
  FakeControlPeer(const std::string& name, std::function<void(int)> serve) {
    auto l = ListenUnix(name);
    EXPECT_TRUE(l.ok()) << l.status().ToString();
    if (l.ok()) listener_ = std::move(l).value();
    thread_ = std::thread([this, serve = std::move(serve), f = release_.get_future()] {
      auto c = Accept(listener_.get());
      if (!c.ok()) return;
      serve(c->get());
      f.wait();  // then closes: the end of stream unblocks a dial that still waits
    });
  }
  ~FakeControlPeer() {
    Release();
    thread_.join();
  }
  void Release() {
    std::call_once(released_, [&] {
      shutdown(listener_.get(), SHUT_RDWR);  // an Accept still waiting returns
      release_.set_value();
    });
  }

 private:
  Fd listener_;
  std::promise<void> release_;
  std::once_flag released_;
  std::thread thread_;  // last: started once the members above exist
};

TEST(FdPassing, DescriptorRidesOnTheBytes) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  Fd a(sv[0]), b(sv[1]);
  Fd file = MemFdWith("payload");
  const char msg[] = "0123456789abcdef";
  ASSERT_TRUE(SendWithFd(a.get(), msg, sizeof(msg), file.get(), kNoDeadline).ok());
  char got[sizeof(msg)] = {};
  Fd received;
  ASSERT_TRUE(RecvWithFd(b.get(), got, sizeof(got), &received, kNoDeadline).ok());
  EXPECT_EQ(std::memcmp(got, msg, sizeof(msg)), 0);
  ASSERT_TRUE(received.valid());
  EXPECT_NE(received.get(), file.get());
  EXPECT_EQ(ReadAll(received.get()), "payload");
  ASSERT_TRUE(SendWithFd(a.get(), msg, 4, -1, kNoDeadline).ok());  // no descriptor at all
  Fd none;
  ASSERT_TRUE(RecvWithFd(b.get(), got, 4, &none, kNoDeadline).ok());
  EXPECT_FALSE(none.valid());
}

// FanoutSend: a healthy target's mutex is free again as soon as its bytes
// went (its own replies wait for no stalled peer), and a stalled target that
// got part of the message is shut down, so nothing can follow the part.
TEST(FanoutSend, ReleasesEachTargetWhenDoneAndCutsAPartialOne) {
  int healthy[2], stalled[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, healthy), 0);
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, stalled), 0);
  const std::string filler(1 << 16, 'f');
  while (send(stalled[0], filler.data(), filler.size(), MSG_DONTWAIT) > 0) {
  }
  std::mutex healthy_mu, stalled_mu;
  const FanoutTarget to[] = {{healthy[0], &healthy_mu}, {stalled[0], &stalled_mu}};
  const std::string message(4096, 'm');
  const auto t0 = Clock::now();
  std::optional<milliseconds> healthy_free;
  std::thread replier([&] {  // the healthy connection's own reply, waiting for its mutex
    std::string got = ReadFor(healthy[1], message.size(), milliseconds(5000));
    EXPECT_EQ(got, message);
    std::lock_guard l(healthy_mu);
    healthy_free = std::chrono::duration_cast<milliseconds>(Clock::now() - t0);
  });
  // A healthy target held until the stalled one gives up is free only at this
  // deadline: the bound below is half of it, and far above the few ms the
  // healthy send takes, for a loaded machine (sanitizers included).
  const std::vector<bool> whole = FanoutSend(to, message, Clock::now() + milliseconds(3000));
  replier.join();
  EXPECT_EQ(whole, (std::vector<bool>{true, false}));
  ASSERT_TRUE(healthy_free.has_value());
  EXPECT_LT(*healthy_free, milliseconds(1500)) << "the healthy target waited for the stalled one";
  EXPECT_TRUE(HungUpWithin(stalled[1], milliseconds(2000))) << "a partial target was not cut";
  for (int fd : {healthy[0], healthy[1], stalled[0], stalled[1]}) close(fd);
}

class FdServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ctx_.name = "target";
    ctx_.agent_id = 77;
    ctx_.secret.fill(5);
    ctx_.options.connect_timeout = std::chrono::milliseconds(2000);
    ctx_.options.io_timeout = std::chrono::milliseconds(2000);
    ctx_.registry = std::make_shared<Registry>(1ull << 32);
    ctx_.notifs = std::make_shared<NotifQueue>(1 << 20, 1 << 20);
    ctx_.peer_conns = std::make_shared<PeerConnLimit>(ctx_.options.max_conns_per_peer);
    server_ =
        std::make_unique<ControlServer>(&ctx_, [](uint64_t key, uint32_t index) -> Result<Fd> {
          if (key != kKey) return Status::RemoteStale("not registered");
          if (index != 0) return Status::InvalidArgument("no such allocation");
          return MemFdWith("allocation-0");
        });
    socket_ = "kvlane-fd-test-" + std::to_string(getpid());
    ASSERT_TRUE(server_->Start(socket_).ok());
    peer_.self_name = "init";
    peer_.peer.name = "target";
    peer_.peer.agent_id = ctx_.agent_id;
    peer_.peer.secret = ctx_.secret;
    peer_.socket = socket_;
    peer_.connect_timeout = peer_.io_timeout = std::chrono::milliseconds(2000);
  }
  void TearDown() override { server_->Stop(); }

  // Asks for allocation 0 of kKey on an authenticated connection and checks the
  // fd that comes back names it.
  static void ExpectAllocationFd(int sock) {
    FdRequest good{kKey, 0, 0};
    ASSERT_TRUE(SendCtl(sock, CtlType::kFdRequest, 0, &good, sizeof(good), Soon()).ok());
    CtlFrame f{};
    Fd fd;
    ASSERT_TRUE(RecvWithFd(sock, &f, sizeof(f), &fd, Soon()).ok());
    EXPECT_EQ(f.seq, 0u);
    ASSERT_TRUE(fd.valid());
    EXPECT_EQ(ReadAll(fd.get()), "allocation-0");
  }

  // An authenticated control connection to the server, whose own sends give up
  // after 200 ms. It has answered one request, so the server counts it as
  // authenticated (its thread marks that just after the handshake's reply,
  // which a revocation racing with that moment would not yet see).
  Fd Dial() {
    auto sock = DialControl(peer_.self_name, peer_.connect_timeout, peer_.peer, socket_);
    EXPECT_TRUE(sock.ok()) << sock.status().ToString();
    if (!sock.ok()) return Fd();
    EXPECT_TRUE(SetIoTimeout(sock->get(), milliseconds(200)).ok());
    ExpectAllocationFd(sock->get());
    return std::move(sock).value();
  }

  AgentContext ctx_;
  std::unique_ptr<ControlServer> server_;
  std::string socket_;
  FdPeer peer_;
};

TEST_F(FdServerTest, HandsAnFdForARegisteredKey) {
  for (int i = 0; i < 3; ++i) {
    auto fd = FetchPeerFd(peer_, kKey, 0);
    ASSERT_TRUE(fd.ok()) << fd.status().ToString();
    EXPECT_EQ(ReadAll(fd->get()), "allocation-0");
  }
}

TEST_F(FdServerTest, UnknownKeyOrIndexComesBackAsTheExportersStatus) {
  auto stale = FetchPeerFd(peer_, kKey + 1, 0);
  EXPECT_EQ(stale.status().code(), Code::kRemoteStale) << stale.status().ToString();
  EXPECT_NE(stale.status().message().find("not registered"), std::string::npos);
  auto index = FetchPeerFd(peer_, kKey, 1);
  EXPECT_EQ(index.status().code(), Code::kInvalidArgument) << index.status().ToString();
}

TEST_F(FdServerTest, WrongSecretGetsNothing) {
  peer_.peer.secret[0] ^= 1;
  auto fd = FetchPeerFd(peer_, kKey, 0);
  EXPECT_EQ(fd.status().code(), Code::kNotAllowed) << fd.status().ToString();
}

// Malformed requests get an error reply and the connection keeps serving.
TEST_F(FdServerTest, MalformedRequestsGetAnErrorReply) {
  auto sock = DialControl(peer_.self_name, peer_.connect_timeout, peer_.peer, socket_);
  ASSERT_TRUE(sock.ok()) << sock.status().ToString();
  FdRequest bad_reserved{kKey, 0, 1};
  const std::string shapes[] = {
      std::string(3, 'x'), std::string(17, 'x'), std::string(),
      std::string(reinterpret_cast<const char*>(&bad_reserved), sizeof(bad_reserved))};
  for (const std::string& req : shapes) {
    ASSERT_TRUE(SendCtl(sock->get(), CtlType::kFdRequest, 0, req.data(),
                        static_cast<uint32_t>(req.size()), Soon())
                    .ok());
    CtlFrame f{};
    std::string text;
    Fd fd;
    ASSERT_TRUE(RecvWithFd(sock->get(), &f, sizeof(f), &fd, Soon()).ok());
    text.resize(f.len);
    ASSERT_TRUE(RecvAll(sock->get(), text.data(), f.len).ok());
    EXPECT_EQ(f.type, static_cast<uint32_t>(CtlType::kFdReply));
    EXPECT_EQ(static_cast<int32_t>(f.seq), static_cast<int32_t>(Code::kInvalidArgument)) << text;
    EXPECT_FALSE(fd.valid());
  }
  ASSERT_NO_FATAL_FAILURE(ExpectAllocationFd(sock->get()));
}

// A connection that never says Hello is cut after connect_timeout; an
// authenticated one idles longer than that and is still served.
TEST_F(FdServerTest, SilentConnectionIsCutButIdleAuthenticatedOneIsNot) {
  ctx_.options.connect_timeout = std::chrono::milliseconds(200);
  auto silent = ConnectUnix(socket_, std::chrono::milliseconds(2000));
  ASSERT_TRUE(silent.ok()) << silent.status().ToString();
  auto sock = DialControl(peer_.self_name, peer_.connect_timeout, peer_.peer, socket_);
  ASSERT_TRUE(sock.ok()) << sock.status().ToString();
  const auto t0 = std::chrono::steady_clock::now();
  // The server's challenge, then the end of stream: it hung up.
  ASSERT_TRUE(HungUpWithin(silent->get(), milliseconds(3000))) << "never cut";
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(2000));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // idle past connect_timeout
  ASSERT_NO_FATAL_FAILURE(ExpectAllocationFd(sock->get()));
}

// A revocation sent while a fetch waits is confirmed by the fetching connection.
TEST_F(FdServerTest, RevocationDuringAFetchIsAcknowledged) {
  std::thread revoker;
  auto slow = std::make_unique<ControlServer>(&ctx_, [&](uint64_t, uint32_t) -> Result<Fd> {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    return MemFdWith("late");
  });
  std::string name = socket_ + "-slow";
  ASSERT_TRUE(slow->Start(name).ok());
  peer_.socket = name;
  revoker = std::thread([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    uint64_t keys[] = {kKey};
    auto t0 = std::chrono::steady_clock::now();
    slow->Revoke(keys);  // waits for every connection's acknowledgement
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(1500));
  });
  auto fd = FetchPeerFd(peer_, kKey, 0);
  revoker.join();
  ASSERT_TRUE(fd.ok()) << fd.status().ToString();
  EXPECT_EQ(ReadAll(fd->get()), "late");
  slow->Stop();
}

// One peer name holds at most max_conns_per_peer control connections at once:
// one more is refused after its handshake, naming the limit, while another name
// still gets in; a slot is free again once its connection ends.
TEST_F(FdServerTest, ConnectionsPerPeerNameAreCapped) {
  ctx_.options.max_conns_per_peer = 2;
  ctx_.peer_conns = std::make_shared<PeerConnLimit>(2);  // server_ keeps the one it holds
  auto capped = std::make_unique<ControlServer>(&ctx_);
  const std::string name = socket_ + "-capped";
  ASSERT_TRUE(capped->Start(name).ok());
  auto dial = [&](const std::string& self) {
    return DialControl(self, milliseconds(2000), peer_.peer, name);
  };
  std::vector<Fd> held;
  for (int i = 0; i < 2; ++i) {
    auto sock = dial("init");
    ASSERT_TRUE(sock.ok()) << sock.status().ToString();
    held.push_back(std::move(sock).value());
  }
  auto refused = dial("init");
  ASSERT_EQ(refused.status().code(), Code::kNotAllowed);
  EXPECT_NE(refused.status().message().find("max_conns_per_peer"), std::string::npos)
      << refused.status().ToString();
  EXPECT_TRUE(dial("other").ok());
  held.pop_back();  // the server thread frees its slot once it sees the close
  Result<Fd> again = dial("init");
  for (auto until = Soon(); !again.ok() && std::chrono::steady_clock::now() < until;) {
    std::this_thread::sleep_for(milliseconds(10));
    again = dial("init");
  }
  EXPECT_TRUE(again.ok()) << again.status().ToString();
  capped->Stop();
}

// A target that stalls half way through the handshake, or trickles it a byte at
// a time: the dial gives up within connect_timeout (it used to wait for the
// rest of a reply forever).
TEST_F(FdServerTest, DialGivesUpOnAPartialOrTrickledHandshake) {
  const std::string name = socket_ + "-stall";
  const ChallengeFrame c = NewChallenge();
  const std::string challenge(reinterpret_cast<const char*>(&c), sizeof(c));
  const std::function<void(int)> stalls[] = {
      [&](int fd) {  // a challenge, then half a reply
        (void)!write(fd, &c, sizeof(c));
        (void)ReadFor(fd, sizeof(StreamHello) + 4, milliseconds(2000));
        const StreamHelloReply ok{};
        (void)!write(fd, &ok, sizeof(ok) / 2);
      },
      [&](int fd) { (void)TrickleUntilCut(fd, challenge, milliseconds(50)); },
  };
  for (const auto& stall : stalls) {
    FakeControlPeer peer(name, stall);
    Status got;
    const auto t0 = Clock::now();
    const bool returned = ReturnsWithin(
        milliseconds(3000),
        [&] { got = DialControl("init", milliseconds(300), peer_.peer, name).status(); },
        [&] { peer.Release(); });
    ASSERT_TRUE(returned) << "DialControl still blocked 3 s into a 300 ms connect_timeout";
    EXPECT_EQ(got.code(), Code::kTimeout) << got.ToString();
    EXPECT_LT(Clock::now() - t0, milliseconds(1500));
  }
}

// The server's side of the handshake ends within connect_timeout too, also
// for a Hello trickled a byte at a time (each byte well within the timeout).
TEST_F(FdServerTest, TrickledHelloIsCutAtConnectTimeout) {
  ctx_.options.connect_timeout = milliseconds(300);
  auto sock = ConnectUnix(socket_, milliseconds(2000));
  ASSERT_TRUE(sock.ok()) << sock.status().ToString();
  auto c = ReadChallenge(sock->get());
  ASSERT_TRUE(c.has_value());
  const std::string hello = HelloFor(*c, ctx_.agent_id, ctx_.secret);
  auto cut = TrickleUntilCut(sock->get(), hello, milliseconds(50));
  ASSERT_TRUE(cut.has_value()) << "a trickled Hello held the connection for " << hello.size() * 50
                               << " ms";
  EXPECT_LT(*cut, milliseconds(1500));
}

// A process that binds the control socket name of an agent not (or no longer)
// running receives every initiator's Hello: it learns no secret from it — an
// initiator sends nothing before a challenge, and its Hello holds a proof only —
// the initiator refuses it for not proving the secret, and what it captured
// is refused by the real agent.
TEST_F(FdServerTest, SquatterAtThePeersSocketNameLearnsNoSecret) {
  const std::string secret(peer_.peer.secret.begin(), peer_.peer.secret.end());
  const std::string name = socket_ + "-squat";
  std::string silent, captured;
  {
    FakeControlPeer squatter(name,
                             [&](int fd) { silent = ReadFor(fd, ~size_t{0}, milliseconds(2000)); });
    auto s = DialControl("init", milliseconds(300), peer_.peer, name);
    EXPECT_EQ(s.status().code(), Code::kTimeout) << s.status().ToString();
  }
  EXPECT_EQ(silent.find(secret), std::string::npos) << "the secret went to a silent squatter";
  EXPECT_EQ(silent, "") << "an initiator spoke before any challenge";
  {
    FakeControlPeer squatter(name, [&](int fd) {
      const ChallengeFrame c = NewChallenge();
      (void)!write(fd, &c, sizeof(c));
      captured = ReadFor(fd, sizeof(StreamHello) + 4, milliseconds(2000));
      StreamHelloReply forged{0, 0, {}};  // "accepted", with a proof it cannot make
      RandomBytes(forged.proof.data(), forged.proof.size());
      (void)!write(fd, &forged, sizeof(forged));
      captured += ReadFor(fd, ~size_t{0}, milliseconds(2000));  // until the initiator closes
    });
    auto s = DialControl("init", milliseconds(2000), peer_.peer, name);
    EXPECT_EQ(s.status().code(), Code::kNotAllowed) << s.status().ToString();
    EXPECT_NE(s.status().message().find("could not prove"), std::string::npos);
  }
  EXPECT_EQ(captured.find(secret), std::string::npos) << "the secret went to a squatter";
  ASSERT_EQ(captured.size(), sizeof(StreamHello) + 4) << "not one Hello, or a frame after it";
  StreamHello h{};
  std::memcpy(&h, captured.data(), sizeof(h));
  EXPECT_EQ(h.role, static_cast<uint8_t>(ConnRole::kCudaControl));
  EXPECT_EQ(h.target_id, peer_.peer.agent_id);
  Fd replay;
  auto r = SendRawHello(socket_, captured, &replay);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, static_cast<int32_t>(Code::kNotAllowed));
  EXPECT_TRUE(HungUpWithin(replay.get(), milliseconds(1500)));
}

// A Hello accepted on one control connection (which stays open and served) is
// refused on another: its proof answers the first connection's challenge only.
TEST_F(FdServerTest, HelloReplayedOnANewConnectionIsRefused) {
  auto first = ConnectUnix(socket_, milliseconds(2000));
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  auto c = ReadChallenge(first->get());
  ASSERT_TRUE(c.has_value());
  const std::string hello = HelloFor(*c, ctx_.agent_id, ctx_.secret);
  ASSERT_TRUE(SendWithFd(first->get(), hello.data(), hello.size(), -1, Soon()).ok());
  StreamHelloReply r{};
  ASSERT_TRUE(RecvWithFd(first->get(), &r, sizeof(r), nullptr, Soon()).ok());
  ASSERT_EQ(r.status, 0);
  StreamHello h{};
  std::memcpy(&h, hello.data(), sizeof(h));
  EXPECT_TRUE(MacEquals(r.proof, ReadyProof(ctx_.secret, h.nonce, c->nonce, ctx_.agent_id)));
  Fd second;
  auto refused = SendRawHello(socket_, hello, &second);
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->status, static_cast<int32_t>(Code::kNotAllowed));
  FdRequest req{kKey, 0, 0};  // not served: the connection is closed
  (void)SendCtl(second.get(), CtlType::kFdRequest, 0, &req, sizeof(req), Soon());
  EXPECT_TRUE(HungUpWithin(second.get(), milliseconds(1500)));
  ASSERT_NO_FATAL_FAILURE(ExpectAllocationFd(first->get()));
}

// A peer that floods fd requests and never reads the replies leaves the
// connection's thread stuck in a send. Revoke (DeregisterMemory) and Stop
// still return within a few io_timeouts, and other peers are still served.
TEST_F(FdServerTest, RevokeIsBoundedWhenAPeerStopsReading) {
  ctx_.options.io_timeout = milliseconds(300);
  Fd sock = Dial();
  ASSERT_TRUE(sock.valid());
  int sent = 0;
  while (
      sent < 1000000 &&
      SendCtl(sock.get(), CtlType::kFdRequest, 0, nullptr, 0, DeadlineIn(milliseconds(200))).ok())
    ++sent;
  ASSERT_LT(sent, 1000000) << "the server kept reading without a reader of its replies";
  const uint64_t keys[] = {kKey};
  auto unblock = [&] { shutdown(sock.get(), SHUT_RDWR); };
  EXPECT_TRUE(ReturnsWithin(
      milliseconds(2500), [&] { server_->Revoke(keys); }, unblock))
      << "Revoke blocked behind a peer that does not read (io_timeout 300 ms)";
  auto fd = FetchPeerFd(peer_, kKey, 0);
  ASSERT_TRUE(fd.ok()) << fd.status().ToString();
  EXPECT_TRUE(ReturnsWithin(
      milliseconds(2500), [&] { server_->Stop(); }, unblock));
}

// Many peers that stop reading cost one Revoke no more than one does: the
// revocation goes to every connection side by side, by one deadline (sent in
// turn, each stalled connection cost io_timeout of its own: 10 of them, 3 s),
// and a healthy connection among them is told, acknowledges and stays served.
TEST_F(FdServerTest, RevokeCostsOneDeadlineHoweverManyPeersStopReading) {
  ctx_.options.io_timeout = milliseconds(300);
  Fd healthy = Dial();
  ASSERT_TRUE(healthy.valid());
  std::vector<Fd> stalled;
  const std::vector<uint64_t> unknown(8192, 12345);  // the answer: 64 KiB, all unread
  const size_t answer = sizeof(CtlFrame) + unknown.size() * 8;
  for (int i = 0; i < 10; ++i) {
    stalled.push_back(Dial());
    const int sock = stalled.back().get();
    ASSERT_TRUE(sock >= 0);
    ASSERT_TRUE(
        SendCtl(sock, CtlType::kLiveCheck, 1, unknown.data(), unknown.size() * 8, Soon()).ok());
    // Its whole answer sits unread in the socket (the server's thread is back
    // to reading frames): the socket now takes no more from the server.
    int queued = 0;
    const auto by = Clock::now() + milliseconds(2000);
    while (Clock::now() < by && ioctl(sock, FIONREAD, &queued) == 0 &&
           static_cast<size_t>(queued) < answer)
      std::this_thread::sleep_for(milliseconds(1));
    ASSERT_EQ(static_cast<size_t>(queued), answer);
  }
  std::thread acker([&] {
    CtlFrame f{};
    std::string payload;
    ASSERT_TRUE(RecvCtl(healthy.get(), &f, &payload, milliseconds(3000)).ok());
    EXPECT_EQ(static_cast<CtlType>(f.type), CtlType::kRevoke);
    EXPECT_TRUE(SendCtl(healthy.get(), CtlType::kRevokeAck, f.seq, nullptr, 0, Soon()).ok());
  });
  const uint64_t keys[] = {kKey};
  const auto t0 = Clock::now();
  server_->Revoke(keys);
  const auto took = Clock::now() - t0;
  acker.join();
  EXPECT_LT(took, milliseconds(1500)) << "2 x io_timeout is 600 ms";
  for (Fd& s : stalled) EXPECT_TRUE(HungUpWithin(s.get(), milliseconds(2000))) << "not cut";
  ASSERT_NO_FATAL_FAILURE(ExpectAllocationFd(healthy.get()));
}

// A connection still in its handshake (a local process that read the
// challenge and went silent) gets no revocation: nothing lands between the
// challenge and the reply of a real initiator's handshake, an unproven peer
// learns no keys, and Revoke (DeregisterMemory) does not wait for it.
TEST_F(FdServerTest, RevokeSkipsAConnectionStillInItsHandshake) {
  // A Revoke that waited for the silent peer would end when its Hello times
  // out (connect_timeout) or when the acks' wait does (io_timeout): both 5 s,
  // twice the bound below, which leaves room for a loaded machine.
  ctx_.options.connect_timeout = milliseconds(5000);
  ctx_.options.io_timeout = milliseconds(5000);
  auto raw = ConnectUnix(socket_, milliseconds(2000));
  ASSERT_TRUE(raw.ok()) << raw.status().ToString();
  ASSERT_TRUE(ReadChallenge(raw->get()).has_value());
  const uint64_t keys[] = {kKey};
  const auto t0 = Clock::now();
  server_->Revoke(keys);
  EXPECT_LT(Clock::now() - t0, milliseconds(2500))
      << "Revoke waited for a peer that never said Hello";
  EXPECT_EQ(ReadFor(raw->get(), 1, milliseconds(300)), "") << "a frame reached an unproven peer";
  // An authenticated connection is still told, and must acknowledge.
  Fd sock = Dial();
  ASSERT_TRUE(sock.valid());
  std::thread revoke([&] { server_->Revoke(keys); });
  CtlFrame f{};
  std::string payload;
  ASSERT_TRUE(RecvCtl(sock.get(), &f, &payload, milliseconds(2000)).ok());
  EXPECT_EQ(static_cast<CtlType>(f.type), CtlType::kRevoke);
  EXPECT_TRUE(SendCtl(sock.get(), CtlType::kRevokeAck, f.seq, nullptr, 0, Soon()).ok());
  revoke.join();
}

// A channel's live-key check: the reply names exactly the keys the registry no
// longer holds (in the order asked); a payload that is not whole keys cuts the
// connection.
TEST_F(FdServerTest, LiveCheckNamesTheKeysNoLongerRegistered) {
  std::vector<uint8_t> buf(4096);
  auto region =
      ctx_.registry->Add(reinterpret_cast<uint64_t>(buf.data()), buf.size(), MemoryKind::kHost, 0);
  ASSERT_TRUE(region.ok());
  const uint64_t live = ctx_.registry->Pieces().at(0).key;
  Fd sock = Dial();
  ASSERT_TRUE(sock.valid());
  const uint64_t asked[] = {12345, live, 999};
  ASSERT_TRUE(SendCtl(sock.get(), CtlType::kLiveCheck, 7, asked, sizeof(asked), Soon()).ok());
  CtlFrame f{};
  std::string payload;
  ASSERT_TRUE(RecvCtl(sock.get(), &f, &payload, milliseconds(2000)).ok());
  EXPECT_EQ(static_cast<CtlType>(f.type), CtlType::kLiveReply);
  EXPECT_EQ(f.seq, 7u);
  ASSERT_EQ(payload.size(), 16u);
  uint64_t gone[2];
  std::memcpy(gone, payload.data(), sizeof(gone));
  EXPECT_EQ(gone[0], 12345u);
  EXPECT_EQ(gone[1], 999u);
  ASSERT_TRUE(ctx_.registry->Remove(*region).ok());  // now the live one is gone too
  ASSERT_TRUE(SendCtl(sock.get(), CtlType::kLiveCheck, 8, &live, 8, Soon()).ok());
  ASSERT_TRUE(RecvCtl(sock.get(), &f, &payload, milliseconds(2000)).ok());
  EXPECT_EQ(payload.size(), 8u);
  ASSERT_TRUE(SendCtl(sock.get(), CtlType::kLiveCheck, 9, asked, 5, Soon()).ok());
  EXPECT_TRUE(HungUpWithin(sock.get(), milliseconds(1500)));
}

// Acknowledging a revocation before it was sent is a protocol violation: the
// connection is cut (it used to make every later revocation count as
// acknowledged at once).
TEST_F(FdServerTest, AcknowledgingAnUnsentRevocationIsAViolation) {
  Fd sock = Dial();
  ASSERT_TRUE(sock.valid());
  ASSERT_TRUE(SendCtl(sock.get(), CtlType::kRevokeAck, ~0ull, nullptr, 0, Soon()).ok());
  EXPECT_TRUE(HungUpWithin(sock.get(), milliseconds(1500)));
}

// An authenticated peer may idle between frames, but one that stalls inside a
// frame is cut after io_timeout.
TEST_F(FdServerTest, StalledFrameIsCut) {
  ctx_.options.io_timeout = milliseconds(300);
  Fd sock = Dial();
  ASSERT_TRUE(sock.valid());
  const char half_header[8] = {};
  ASSERT_EQ(send(sock.get(), half_header, sizeof(half_header), 0), 8);
  const auto t0 = Clock::now();
  EXPECT_TRUE(HungUpWithin(sock.get(), milliseconds(2000)));
  EXPECT_LT(Clock::now() - t0, milliseconds(1500));
}

// A header announcing more payload than its type carries is cut as it is read,
// before anything is allocated for it: it used to take up to 1 MiB per
// connection, zero-filled, for io_timeout while the payload never came.
TEST_F(FdServerTest, FrameLongerThanItsTypeCarriesIsCutAtItsHeader) {
  ctx_.options.io_timeout = milliseconds(5000);
  for (CtlType type : {CtlType::kFdRequest, CtlType::kRevokeAck, CtlType::kNotify}) {
    Fd sock = Dial();
    ASSERT_TRUE(sock.valid());
    const CtlFrame header{static_cast<uint32_t>(type),
                          CtlPayloadLimit(static_cast<uint32_t>(type)) + 1, 1};
    ASSERT_EQ(send(sock.get(), &header, sizeof(header), MSG_NOSIGNAL),
              static_cast<ssize_t>(sizeof(header)));
    const auto t0 = Clock::now();
    EXPECT_TRUE(HungUpWithin(sock.get(), milliseconds(2000)))
        << "type " << static_cast<uint32_t>(type);
    EXPECT_LT(Clock::now() - t0, milliseconds(1500))
        << "waited for the payload: type " << static_cast<uint32_t>(type);
  }
  EXPECT_EQ(CtlPayloadLimit(static_cast<uint32_t>(CtlType::kLiveReply)), kMaxLiveKeys * 8);
  EXPECT_EQ(CtlPayloadLimit(99), 0u);
}

// A live check's answer is awaited by one deadline, however many revocations a
// peer sends meanwhile: one that keeps sending them (each well within
// io_timeout of the last) and never answers held a channel's connect, and the
// peer's lock, forever.
TEST_F(FdServerTest, LiveCheckAnswerIsAwaitedByOneDeadline) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  Fd mine(sv[0]), theirs(sv[1]);
  std::atomic<bool> stop{false};
  std::thread revoker([&] {
    for (uint64_t n = 1; !stop.load(); ++n) {
      const uint64_t key = 1000 + n;
      if (!SendCtl(theirs.get(), CtlType::kRevoke, n, &key, 8, Soon()).ok()) return;
      std::this_thread::sleep_for(milliseconds(20));
    }
  });
  int revocations = 0;
  std::string gone;
  const auto t0 = Clock::now();
  Status s = AwaitLiveReply(
      mine.get(), 7, DeadlineIn(milliseconds(300)),
      [&](const std::string& keys, uint64_t) {
        revocations += keys.size() == 8;
        return Status::Ok();
      },
      &gone);
  const auto took = Clock::now() - t0;
  stop = true;
  shutdown(mine.get(), SHUT_RDWR);
  revoker.join();
  EXPECT_EQ(s.code(), Code::kTimeout) << s.ToString();
  EXPECT_LT(took, milliseconds(1000));
  EXPECT_GT(revocations, 3);  // they were taken as they came
}

// The answer itself ends the wait; revocations before it are handed over; any
// other frame (an answer to another check) is a violation.
TEST_F(FdServerTest, LiveCheckAnswerEndsTheWait) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  Fd mine(sv[0]), theirs(sv[1]);
  const uint64_t revoked = 11, dead[2] = {21, 22};
  ASSERT_TRUE(SendCtl(theirs.get(), CtlType::kRevoke, 1, &revoked, 8, Soon()).ok());
  ASSERT_TRUE(SendCtl(theirs.get(), CtlType::kLiveReply, 7, dead, sizeof(dead), Soon()).ok());
  ASSERT_TRUE(SendCtl(theirs.get(), CtlType::kLiveReply, 6, dead, sizeof(dead), Soon()).ok());
  std::vector<uint64_t> seen;
  const auto take = [&](const std::string& keys, uint64_t) {
    uint64_t k;
    std::memcpy(&k, keys.data(), 8);
    seen.push_back(k);
    return Status::Ok();
  };
  std::string gone;
  ASSERT_TRUE(AwaitLiveReply(mine.get(), 7, Soon(), take, &gone).ok());
  EXPECT_EQ(seen, std::vector<uint64_t>{11});
  EXPECT_EQ(gone, std::string(reinterpret_cast<const char*>(dead), sizeof(dead)));
  EXPECT_EQ(AwaitLiveReply(mine.get(), 8, Soon(), take, &gone).code(), Code::kBackend);
}

// The initiator's side reads frames the target sends (answers, revocations,
// acknowledgements) by the same per-type limits: a header announcing more is
// refused at once, before its payload is awaited or allocated.
TEST_F(FdServerTest, InitiatorCutsAFrameLongerThanItsTypeCarriesAtItsHeader) {
  for (CtlType type :
       {CtlType::kLiveReply, CtlType::kRevoke, CtlType::kNotifyAck, CtlType::kRevokeAck}) {
    int sv[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    Fd mine(sv[0]), theirs(sv[1]);
    const CtlFrame header{static_cast<uint32_t>(type),
                          CtlPayloadLimit(static_cast<uint32_t>(type)) + 8, 7};
    ASSERT_EQ(send(theirs.get(), &header, sizeof(header), MSG_NOSIGNAL),
              static_cast<ssize_t>(sizeof(header)));
    const auto t0 = Clock::now();
    std::string gone;
    const Status s = AwaitLiveReply(
        mine.get(), 7, DeadlineIn(milliseconds(3000)),
        [](const std::string&, uint64_t) { return Status::Ok(); }, &gone);
    EXPECT_EQ(s.code(), Code::kBackend)
        << "type " << static_cast<uint32_t>(type) << ": " << s.ToString();
    EXPECT_LT(Clock::now() - t0, milliseconds(1500))
        << "waited for the payload: type " << static_cast<uint32_t>(type);
    // The control thread's read (RecvCtl) refuses it the same way.
    ASSERT_EQ(send(theirs.get(), &header, sizeof(header), MSG_NOSIGNAL),
              static_cast<ssize_t>(sizeof(header)));
    CtlFrame f{};
    std::string payload;
    EXPECT_EQ(RecvCtl(mine.get(), &f, &payload, milliseconds(3000)).code(), Code::kBackend);
    EXPECT_TRUE(payload.empty());
  }
}

// Notifications are capped at 64 KiB by every sender: a larger one is hostile.
TEST_F(FdServerTest, OversizedNotificationIsAViolation) {
  Fd sock = Dial();
  ASSERT_TRUE(sock.valid());
  const std::string big((64u << 10) + 1, 'n');
  ASSERT_TRUE(SendCtl(sock.get(), CtlType::kNotify, 0, big.data(),
                      static_cast<uint32_t>(big.size()), Soon())
                  .ok());
  EXPECT_TRUE(HungUpWithin(sock.get(), milliseconds(1500)));
  EXPECT_TRUE(ctx_.notifs->TakeAll().empty());
}

// The fetches of one VMM import share one deadline: a slow peer cannot hold
// the importer for one io_timeout per allocation; a cancelled one starts none.
TEST_F(FdServerTest, FetchesStopAtTheirCommonDeadline) {
  auto slow = std::make_unique<ControlServer>(&ctx_, [](uint64_t, uint32_t) -> Result<Fd> {
    std::this_thread::sleep_for(milliseconds(150));
    return MemFdWith("slow");
  });
  const std::string name = socket_ + "-slow";
  ASSERT_TRUE(slow->Start(name).ok());
  peer_.socket = name;
  peer_.io_timeout = milliseconds(1000);
  peer_.deadline = DeadlineIn(milliseconds(400));
  const auto t0 = Clock::now();
  Status last;
  for (int i = 0; i < 10 && last.ok(); ++i) last = FetchPeerFd(peer_, kKey, 0).status();
  EXPECT_EQ(last.code(), Code::kTimeout) << last.ToString();
  EXPECT_LT(Clock::now() - t0, milliseconds(900));
  std::atomic<bool> closing{true};
  peer_.deadline = DeadlineIn(milliseconds(2000));
  peer_.cancel = &closing;
  EXPECT_EQ(FetchPeerFd(peer_, kKey, 0).status().code(), Code::kCanceled);
  slow->Stop();
}

// A channel dials only the control socket named after the peer's agent id,
// whatever socket its metadata announces.
TEST_F(FdServerTest, ChannelDialsOnlyTheSocketOfThePeersAgentId) {
  AgentContext init;
  init.name = "init";
  init.options.connect_timeout = milliseconds(2000);
  auto other = DialControl(init, peer_.peer, socket_);  // a live server, but not kvlane-cuda-<id>
  EXPECT_EQ(other.status().code(), Code::kNotAllowed) << other.status().ToString();
  EXPECT_EQ(ControlSocketName(0x4d), "kvlane-cuda-000000000000004d");
}

}  // namespace
}  // namespace kvlane::core
